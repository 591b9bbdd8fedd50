-- Clicks slower than a second, read from the source by its name.
SELECT user, url, ts, ms
FROM clicks
WHERE ms > 1000
