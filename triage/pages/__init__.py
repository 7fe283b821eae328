"""The triage app's pages: the views a person's browser asks for and what only they use.

`groups.py` the triage page (the list of failure groups), a group's page and the actions on
one group or many; `receipts.py` the receipts page; `ingestion.py` the ingestion and tool
policy pages, over their reads in `ingestion_selectors.py`; `preferences.py` a person's
preferences; `context_processors.py` the navigation and time zone every page's template
shows. Only `triage/urls.py` imports them.
"""
