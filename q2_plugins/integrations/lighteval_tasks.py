"""LightEval custom tasks of q2-plugins (``--custom-tasks q2_plugins.integrations.lighteval_tasks``): ``q2_wow``, the
bundled Wizard-of-Wikipedia sample scored by Q². The settings come from the environment variable
``Q2_LIGHTEVAL_CONFIG`` (a JSON object of ``Q2Config`` fields, or the path of a JSON file; unset: the defaults).
Other data or settings: a task file of your own with :func:`q2_plugins.integrations.lighteval.q2_task`."""

from q2_plugins.integrations.adapters import config_from_env
from q2_plugins.integrations.lighteval import q2_task

CONFIG_ENV = "Q2_LIGHTEVAL_CONFIG"

TASKS_TABLE = [q2_task("q2_wow", config=config_from_env(CONFIG_ENV))]
