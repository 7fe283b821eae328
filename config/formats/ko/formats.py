"""How the pages write dates in Korean: 2026년 12월 1일, 12월 1일 14:05 (24-hour clock); the
short weekday follows the date in brackets, as Korean writes it: 12월 5일 (토) 17:00."""

DATE_FORMAT = "Y년 n월 j일"
DATETIME_FORMAT = "Y년 n월 j일 H:i"
SHORT_DATETIME_FORMAT = "n월 j일 H:i"
MONTH_DAY_FORMAT = "n월 j일"
TIME_FORMAT = "H:i"
# Not Django's names: every language's module defines them (config/formats/*/formats.py).
# "D" is the short weekday (triage.timezones: "Sat", "토").
WEEKDAY_DATETIME_FORMAT = "n월 j일 (D) H:i"
SECONDS_DATETIME_FORMAT = "n월 j일 H:i:s"
SECONDS_TIME_FORMAT = "H:i:s"
# What a time says on hover, before its zone: the whole date, the weekday and the seconds.
FULL_DATETIME_FORMAT = "Y년 n월 j일 (D) H:i:s"
