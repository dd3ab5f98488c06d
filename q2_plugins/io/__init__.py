"""Files: reading scoring inputs (:mod:`.inputs`), writing result files (:mod:`.outputs`) and the layout of a
result row and its sidecar (:mod:`.rows`). The core API takes lists; only the command line and the jobs read and
write files.
"""
