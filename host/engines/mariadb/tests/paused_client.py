"""A client that holds token N: it writes once, then waits (the test stops
it with SIGSTOP meanwhile, as a long GC pause would) until told to go on,
and writes again with the same token. Prints what happened to each write."""

import sys

import pymysql

port, db, user, token = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
conn = pymysql.connect(host="127.0.0.1", port=int(port), user=user, password="pw", database=db, autocommit=True)
with conn.cursor() as c:
    c.execute("UPDATE orders SET body = 'from the paused client', token = %s WHERE id = 'o-1'", (token,))
    print(f"wrote with {token}", flush=True)
    sys.stdin.readline()
    try:
        c.execute("UPDATE orders SET body = 'late', token = %s WHERE id = 'o-1'", (token,))
        print("admitted", flush=True)
    except pymysql.err.Error as e:
        print(f"refused {e.sqlstate} {e.args[1]}", flush=True)
