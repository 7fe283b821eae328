"""How the pages write dates in English (Django's names; the templates use the names through
triage.timezones.moment_text and the `moment` filter)."""

DATE_FORMAT = "M j, Y"
DATETIME_FORMAT = "M j, Y H:i"
SHORT_DATETIME_FORMAT = "M j H:i"
MONTH_DAY_FORMAT = "M j"
TIME_FORMAT = "H:i"
# Not Django's names: every language's module defines them (config/formats/*/formats.py).
# "D" is the short weekday (triage.timezones: "Sat", "토").
WEEKDAY_DATETIME_FORMAT = "D M j H:i"
SECONDS_DATETIME_FORMAT = "M j H:i:s"
SECONDS_TIME_FORMAT = "H:i:s"
# What a time says on hover, before its zone: the whole date, the weekday and the seconds.
FULL_DATETIME_FORMAT = "D M j, Y H:i:s"
