"""How the pages write dates in English (Django's names; the templates use the names)."""

DATE_FORMAT = "M j, Y"
DATETIME_FORMAT = "M j, Y H:i"
SHORT_DATETIME_FORMAT = "M j H:i"
MONTH_DAY_FORMAT = "M j"
TIME_FORMAT = "H:i"
# Not one of Django's names: every language's module defines it (config/formats/*/formats.py).
WEEKDAY_DATETIME_FORMAT = "D M j H:i"
