"""Result rows of ``q2 score``: the one row pipeline both engines score with (:mod:`.pipeline`), the one row layout
they write (:mod:`.layout`), the one reader of result files (:mod:`.reader`) and the run's sidecar
(:mod:`.sidecar`)."""

from q2_plugins.io.rows.layout import (
           INPUT_PREFIX,
           RANDOM_WEIGHTS_FIELD,
           RESERVED_FIELDS,
           ROW_FIELD,
           SIGNATURE_FIELD,
           kept_name,
           result_fields,
           result_row,
)
from q2_plugins.io.rows.pipeline import RowSpec, problems_of, score_records
from q2_plugins.io.rows.reader import ResultRows, read_results, read_sidecar, response_result, scan_results
from q2_plugins.io.rows.sidecar import META_FORMAT, dropped_path, write_meta

__all__ = ["RowSpec", "score_records", "result_row", "result_fields", "kept_name", "read_results", "scan_results",
           "read_sidecar", "ResultRows", "response_result", "write_meta", "dropped_path", "problems_of", "META_FORMAT",
           "ROW_FIELD", "SIGNATURE_FIELD", "RANDOM_WEIGHTS_FIELD", "INPUT_PREFIX", "RESERVED_FIELDS"]
