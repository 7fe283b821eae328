"""The failure vocabulary: the codes (`taxonomy.py`) and the rules that classify a failure
into its lane, execution state and next action (`lanes.py`). What runtimes and the client
read in the taxonomy document is spelled here once. It imports no model, page or door: only
itself and the shared core.
"""
