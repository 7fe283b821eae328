"""How the pages write dates in Korean: 2026년 12월 1일, 12월 1일 14:05 (24-hour clock); the
weekday follows the date, as Korean writes it: 12월 5일 토요일 17:00."""

DATE_FORMAT = "Y년 n월 j일"
DATETIME_FORMAT = "Y년 n월 j일 H:i"
SHORT_DATETIME_FORMAT = "n월 j일 H:i"
MONTH_DAY_FORMAT = "n월 j일"
TIME_FORMAT = "H:i"
# Not one of Django's names: every language's module defines it (config/formats/*/formats.py).
WEEKDAY_DATETIME_FORMAT = "n월 j일 l H:i"
