-- Example tables of the GoogleSQL differential-privacy documentation (BigQuery's
-- query-syntax#dp_clause, aggregate-dp-functions and differential-privacy pages).
-- Rows as the docs define them in google/zetasql@2d8f7b7db9:docs/query-syntax.md#L6363
-- ("Tables for examples") and #L6375; the views of "Views for examples" (#L6388, #L6394).
-- Translated mechanically to DuckDB: "{{USERNAME}}." dataset prefixes dropped, double-quoted
-- strings -> single quotes. The views' OPTIONS(anonymization_userid_column='id') is a privacy
-- setting and lives in policy.yaml (privacy_unit: id), not here.
CREATE TABLE professors AS
  SELECT 101 AS id, 'pencil' AS item, 24 AS quantity UNION ALL
  SELECT 123, 'pen', 16 UNION ALL
  SELECT 123, 'pencil', 10 UNION ALL
  SELECT 123, 'pencil', 38 UNION ALL
  SELECT 101, 'pen', 19 UNION ALL
  SELECT 101, 'pen', 23 UNION ALL
  SELECT 130, 'scissors', 8 UNION ALL
  SELECT 150, 'pencil', 72;

CREATE TABLE students AS
  SELECT 1 AS id, 'pencil' AS item, 5 AS quantity UNION ALL
  SELECT 1, 'pen', 2 UNION ALL
  SELECT 2, 'pen', 1 UNION ALL
  SELECT 3, 'pen', 4;

CREATE VIEW view_on_professors AS SELECT * FROM professors;

CREATE VIEW view_on_students AS SELECT * FROM students;

-- table_a: named by the two queries of docs/differential-privacy.md "Performance implications
-- of differential privacy" (#L243), which give no rows or types. SYNTHESISED here,
-- deterministically (20 rows, 5 privacy units, two values of column_a), so that the query
-- can run at all; nothing in it comes from the source except the column names.
CREATE TABLE table_a AS
  SELECT i % 5 AS id,
         CASE WHEN i % 2 = 0 THEN 'x' ELSE 'y' END AS column_a,
         i AS column_b
  FROM range(20) AS t(i);
