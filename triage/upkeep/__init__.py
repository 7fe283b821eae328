"""Upkeep of the stored data: retention prunes old records and runner events and takes them
back out of the counters (`retention.py`), run by beat (`triage.tasks`) and by
`manage.py prune_records`.
"""
