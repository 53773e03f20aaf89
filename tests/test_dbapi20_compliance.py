"""PEP 249 compliance: Stuart Bishop's DB-API 2.0 suite (tests/third_party/dbapi20.py, public
domain) run against privplan.dbapi.

Every test of the suite that applies to a read-only DP connection runs as the suite wrote it.
The suite builds its fixtures with DDL and INSERT (``create table dbapi20test_booze``), which
privplan refuses: such tests are overridden here by the same checks on DP answers over the
demo database, and each also checks that the suite's own statement is refused and spends
nothing. Tests of optional features privplan does not offer assert its documented behaviour
instead. Each override says why in its first line. Nothing is skipped.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any, ClassVar

import duckdb
from third_party import dbapi20

import privplan as pp
from privplan import dbapi
from privplan.demo.data import demo_policy_path, write_demo_database
from privplan.testing import noise_disabled

# A DP query with a known number of rows (4 hospitals x 2 sexes, keys from the public domain),
# one with a single row, and one with none (HAVING runs on the noisy answer).
ROWS_SQL = ("SELECT hospital, sex, COUNT(*) AS n FROM visits GROUP BY hospital, sex "
            "ORDER BY hospital, sex")
ONE_ROW_SQL = "SELECT COUNT(*) AS n FROM visits WHERE hospital = 'A'"
NO_ROWS_SQL = ("SELECT hospital, COUNT(*) AS n FROM visits GROUP BY hospital "
               "HAVING COUNT(*) < 0")


class TestPrivplanDBAPI20(dbapi20.DatabaseAPI20Test):
    driver = dbapi
    connect_args: ClassVar[tuple[Any, ...]] = ()
    connect_kw_args: ClassVar[dict[str, Any]] = {}
    _tmp: ClassVar[tempfile.TemporaryDirectory[str]]
    _exact: ClassVar[list[tuple[Any, ...]]]

    @classmethod
    def setUpClass(cls) -> None:
        cls._tmp = tempfile.TemporaryDirectory()
        db = write_demo_database(Path(cls._tmp.name) / "demo.duckdb", rows=2000)
        cls.connect_args = (str(db),)
        cls.connect_kw_args = {"policy": demo_policy_path(), "budget": pp.PureDP(10),
                               "epsilon": 0.5}
        plain = duckdb.connect(str(db), read_only=True)
        try:
            cls._exact = plain.execute(ROWS_SQL).fetchall()
        finally:
            plain.close()

    @classmethod
    def tearDownClass(cls) -> None:
        cls._tmp.cleanup()

    def tearDown(self) -> None:
        """privplan creates no table, so there is nothing to drop (the suite's tearDown opens a
        connection to run DROP TABLE statements, each refused)."""

    # -- helpers -----------------------------------------------------------------------------
    def _refused(self, con: dbapi.Connection, cur: dbapi.Cursor, sql: str) -> None:
        """The suite's DDL/INSERT statement is refused as a ProgrammingError, spending nothing
        and leaving no result on the cursor."""
        before = con.spent()
        with self.assertRaises(dbapi.ProgrammingError) as info:
            cur.execute(sql)
        self.assertIsInstance(info.exception.privplan_error,
                              (pp.UnsupportedQueryError, pp.PolicyError))
        self.assertEqual(con.spent(), before)
        self.assertIsNone(cur.description)
        self.assertEqual(cur.rowcount, -1)

    def _insert(self, table: str = "booze") -> str:
        return f"{self.insert} into {self.table_prefix}{table} values ('Victoria Bitter')"

    def _paraminsert(self, cur: dbapi.Cursor) -> None:
        """DP version of the suite's parameter check (used by test_execute, test_setinputsizes
        and test_setoutputsize_basic): a ? parameter holding a quote, next to a string literal
        holding %s, :may, ? and :1e, none of which may be taken for a placeholder."""
        self._refused(cur.connection, cur, self.ddl2)
        trouble = "thi%s :may ca%(u)se? troub:1e"
        sql = f"SELECT COUNT(*) AS n FROM visits WHERE hospital <> '{trouble}' AND hospital = ?"
        self.assertEqual(dbapi.bind_parameters(sql, ("Cooper's",)),
                         sql.removesuffix("?") + "'Cooper''s'")
        with noise_disabled():
            cur.execute(sql, ("Cooper's",))
            self.assertIn(cur.rowcount, (-1, 1))
            self.assertEqual(cur.fetchall(), [(0,)])
            cur.execute(sql, ("A",))
        want = sum(r[2] for r in self._exact if r[0] == "A")
        self.assertEqual(cur.fetchall(), [(want,)])

    # -- overrides: the suite's fixtures need DDL and INSERT -------------------------------
    def test_cursor_isolation(self) -> None:
        """No writes to isolate: what the cursors of one connection share is its budget."""
        con = self._connect()
        try:
            cur1, cur2 = con.cursor(), con.cursor()
            self._refused(con, cur1, self.ddl1)
            cur1.execute("SELECT COUNT(*) AS n FROM visits WHERE hospital = 'A'")
            self.assertEqual(con.spent(), pp.PureDP(0.5))
            # disjoint from cur1's query: parallel composition, also across cursors
            cur2.execute("SELECT COUNT(*) AS n FROM visits WHERE hospital = 'B'")
            self.assertEqual(cur2.cost, pp.PureDP(0))
            self.assertEqual(len(cur1.fetchall()), 1)
            self.assertEqual(len(cur2.fetchall()), 1)
        finally:
            con.close()

    def test_description(self) -> None:
        """No DDL: description is None before an answer and after a refused statement."""
        con = self._connect()
        try:
            cur = con.cursor()
            self.assertIsNone(cur.description)
            self._refused(con, cur, self.ddl1)
            cur.execute("SELECT hospital, COUNT(*) AS n FROM visits GROUP BY hospital")
            self.assertEqual(len(cur.description), 2)
            self.assertTrue(all(len(d) == 7 for d in cur.description))
            self.assertEqual([d[0] for d in cur.description], ["hospital", "n"])
            self.assertEqual(cur.description[0][1], self.driver.STRING)
            self.assertEqual(cur.description[1][1], self.driver.NUMBER)
            self._refused(con, cur, self.ddl2)  # and it is reset by the next statement
        finally:
            con.close()

    def test_rowcount(self) -> None:
        """No DDL or INSERT: rowcount is -1 without an answer, else the answer's row count."""
        con = self._connect()
        try:
            cur = con.cursor()
            self.assertEqual(cur.rowcount, -1)
            self._refused(con, cur, self.ddl1)
            self._refused(con, cur, self._insert())
            cur.execute(ONE_ROW_SQL)
            self.assertEqual(cur.rowcount, 1)
            cur.execute(ROWS_SQL)
            self.assertEqual(cur.rowcount, len(self._exact))
            self._refused(con, cur, self.ddl2)
        finally:
            con.close()

    def test_callproc(self) -> None:
        """No stored procedures: callproc is absent, PEP 249's preferred signal (hasattr)."""
        con = self._connect()
        try:
            self.assertFalse(hasattr(con.cursor(), "callproc"))
        finally:
            con.close()

    def test_non_idempotent_close(self) -> None:
        """privplan documents close() as idempotent (as sqlite3; pools and with-blocks close
        twice; the suite notes that reasonable persons differ); any other use then fails."""
        con = self._connect()
        cur = con.cursor()
        con.close()
        con.close()
        self.assertTrue(con.closed)
        for call in (con.cursor, con.commit, con.rollback, con.spent, cur.fetchall,
                     lambda: cur.execute("SELECT 1")):
            with self.assertRaisesRegex(self.driver.ProgrammingError, "closed"):
                call()

    def test_executemany(self) -> None:
        """executemany would spend budget on answers it discards: NotSupportedError, free."""
        con = self._connect()
        try:
            cur = con.cursor()
            self._refused(con, cur, self.ddl1)
            for sql in (f"{self.insert} into {self.table_prefix}booze values (?)",
                        "SELECT COUNT(*) FROM visits WHERE hospital = ?"):
                with self.assertRaisesRegex(self.driver.NotSupportedError,
                                            r"Call execute\(\) once per parameter set"):
                    cur.executemany(sql, [("Cooper's",), ("Boag's",)])
            self.assertEqual(con.spent(), pp.PureDP(0))
            self.assertEqual(cur.rowcount, -1)
        finally:
            con.close()

    def test_fetchone(self) -> None:
        """The suite's fetchone checks, on DP answers instead of an inserted table."""
        con = self._connect()
        try:
            cur = con.cursor()
            self.assertRaises(self.driver.Error, cur.fetchone)
            self._refused(con, cur, self.ddl1)
            self.assertRaises(self.driver.Error, cur.fetchone)
            with noise_disabled():
                cur.execute(NO_ROWS_SQL)
            self.assertIsNone(cur.fetchone())
            self.assertIn(cur.rowcount, (-1, 0))
            self._refused(con, cur, self._insert())
            self.assertRaises(self.driver.Error, cur.fetchone)
            with noise_disabled():
                cur.execute(ONE_ROW_SQL)
            r = cur.fetchone()
            self.assertEqual(len(r), 1)
            self.assertEqual(r[0], sum(row[2] for row in self._exact if row[0] == "A"))
            self.assertIsNone(cur.fetchone())
            self.assertIn(cur.rowcount, (-1, 1))
        finally:
            con.close()

    def test_fetchmany(self) -> None:
        """The suite's fetchmany checks, on a DP answer of 8 rows instead of 6 inserted."""
        n = len(self._exact)
        self.assertEqual(n, 8)
        con = self._connect()
        try:
            cur = con.cursor()
            self.assertRaises(self.driver.Error, cur.fetchmany, 4)
            self._refused(con, cur, self.ddl1)
            with noise_disabled():
                cur.execute(ROWS_SQL)
            self.assertEqual(len(cur.fetchmany()), 1)  # arraysize defaults to 1
            cur.arraysize = 10
            self.assertEqual(len(cur.fetchmany(3)), 3)
            self.assertEqual(len(cur.fetchmany(10)), n - 4)
            self.assertEqual(len(cur.fetchmany(4)), 0)
            self.assertIn(cur.rowcount, (-1, n))
            cur.arraysize = 5
            with noise_disabled():
                cur.execute(ROWS_SQL)
            self.assertEqual(len(cur.fetchmany()), 5)
            self.assertEqual(len(cur.fetchmany()), n - 5)
            self.assertEqual(len(cur.fetchmany()), 0)
            cur.arraysize = n
            with noise_disabled():
                cur.execute(ROWS_SQL)
            self.assertEqual(cur.fetchmany(), self._exact)
            self.assertEqual(cur.fetchmany(), [])
            self.assertIn(cur.rowcount, (-1, n))
            with noise_disabled():
                cur.execute(NO_ROWS_SQL)
            self.assertEqual(cur.fetchmany(), [])
            self.assertIn(cur.rowcount, (-1, 0))
        finally:
            con.close()

    def test_fetchall(self) -> None:
        """The suite's fetchall checks, on DP answers instead of an inserted table."""
        con = self._connect()
        try:
            cur = con.cursor()
            self.assertRaises(self.driver.Error, cur.fetchall)
            self._refused(con, cur, self.ddl1)
            for sql in self._populate():
                self._refused(con, cur, sql)
            self.assertRaises(self.driver.Error, cur.fetchall)
            with noise_disabled():
                cur.execute(ROWS_SQL)
            self.assertEqual(cur.fetchall(), self._exact)
            self.assertIn(cur.rowcount, (-1, len(self._exact)))
            self.assertEqual(cur.fetchall(), [])
            with noise_disabled():
                cur.execute(NO_ROWS_SQL)
            self.assertEqual(cur.fetchall(), [])
            self.assertIn(cur.rowcount, (-1, 0))
        finally:
            con.close()

    def test_mixedfetch(self) -> None:
        """The suite's mixed fetch checks, on a DP answer instead of an inserted table."""
        con = self._connect()
        try:
            cur = con.cursor()
            with noise_disabled():
                cur.execute(ROWS_SQL)
            rows = [cur.fetchone(), *cur.fetchmany(2), cur.fetchone(), *cur.fetchall()]
            self.assertEqual(rows, self._exact)
            self.assertIn(cur.rowcount, (-1, len(self._exact)))
        finally:
            con.close()

    def test_nextset(self) -> None:
        """One answer per execute, no procedures: nextset is absent (optional in PEP 249)."""
        con = self._connect()
        try:
            self.assertFalse(hasattr(con.cursor(), "nextset"))
        finally:
            con.close()

    def test_setoutputsize(self) -> None:
        """setoutputsize is a documented no-op (answers are fetched whole): answers unchanged."""
        con = self._connect()
        try:
            cur = con.cursor()
            cur.setoutputsize(1000)
            cur.setoutputsize(2000, 0)
            with noise_disabled():
                cur.execute(ROWS_SQL)
            self.assertEqual(cur.fetchall(), self._exact)
        finally:
            con.close()

    def test_None(self) -> None:
        """No INSERT of a NULL: NULL comes back as None from a constant and from a DP answer."""
        con = self._connect()
        try:
            cur = con.cursor()
            self._refused(con, cur, self.ddl2)
            cur.execute("SELECT NULL AS drink")
            self.assertEqual(cur.fetchall(), [(None,)])
            self.assertEqual(con.spent(), pp.PureDP(0))  # a constant select is free
            with noise_disabled():  # an average over no row is NULL
                cur.execute("SELECT AVG(age) AS a FROM visits WHERE age > 1000")
            self.assertEqual(cur.fetchall(), [(None,)])
        finally:
            con.close()
