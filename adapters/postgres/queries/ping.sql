-- The health check and the start-up probe: the cheapest statement that needs a working session.
SELECT 1
