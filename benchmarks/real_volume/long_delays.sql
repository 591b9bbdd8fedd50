SELECT flight, origin, dest, date, arr_delay FROM flights WHERE arr_delay > 120
