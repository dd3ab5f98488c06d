"""``python -m q2_plugins.lm_eval_ext`` prints the directory of the bundled lm-eval tasks, for ``--include_path``."""

from . import TASKS_DIR

print(TASKS_DIR)
