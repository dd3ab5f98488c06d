"""``python -m q2_plugins.integrations.lm_eval`` prints the directory of the bundled lm-eval tasks, for
``--include_path``."""

from q2_plugins.integrations.lm_eval import TASKS_DIR

print(TASKS_DIR)
