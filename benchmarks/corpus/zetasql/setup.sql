-- Tables of ZetaSQL's DP compliance tests: the [prepare_database] sections of
-- google/zetasql@2d8f7b7db9:zetasql/compliance/testdata/differential_privacy.test (#L6-#L135;
-- anonymization.test #L1-#L130 and differential_privacy_errors.test #L1 define the same tables).
-- Translated mechanically to DuckDB: int64 -> BIGINT, double -> DOUBLE. OPTIONS(userid_column=uid)
-- is the privacy unit and lives in policy.yaml (privacy_unit: uid). The constant PROTO_ENUM
-- (differential_privacy.test #L1-#L3, a report-format enum) is not a table and is not created.
CREATE TABLE TestTableWithUid AS
SELECT CAST(1 AS BIGINT) AS uid,
       CAST(NULL AS BIGINT) AS int64_val,
       CAST(NULL AS DOUBLE) AS double_val UNION ALL
  SELECT 2,  2,    1.5  UNION ALL
  SELECT 3,  1,    1.5  UNION ALL
  SELECT 4,  NULL, 2.5  UNION ALL
  SELECT 5,  1,    3.5  UNION ALL
  SELECT 6,  2,    NULL UNION ALL
  SELECT 7,  1,    -0.5 UNION ALL
  SELECT 8,  4,    -1.5 UNION ALL
  SELECT 9,  2,    1.5  UNION ALL
  SELECT 10, 3,    2.5;

CREATE TABLE TestTableWithUid2 AS
SELECT CAST(1 AS BIGINT) AS id, CAST(1 AS BIGINT) AS uid,
       CAST(NULL AS BIGINT) AS int64_val,
       CAST(NULL AS DOUBLE) AS double_val UNION ALL
  SELECT 2,   2,  2,    1.5   UNION ALL
  SELECT 3,   3,  1,    1.5   UNION ALL
  SELECT 4,   1,  NULL, 2.5   UNION ALL
  SELECT 5,   2,  1,    3.5   UNION ALL
  SELECT 6,   2,  2,    NULL  UNION ALL
  SELECT 7,   1,  1,    -0.5  UNION ALL
  SELECT 8,   2,  4,    -1.5  UNION ALL
  SELECT 9,   3,  2,    1.5   UNION ALL
  SELECT 10,  2,  3,    2.5;

CREATE TABLE TestTableWithUid3 AS
SELECT CAST(1 AS BIGINT) AS id, CAST(1 AS BIGINT) AS uid,
       CAST(NULL AS BIGINT) AS int64_val,
       CAST(NULL AS DOUBLE) AS double_val UNION ALL
  SELECT 2,   2,  2,    1.5   UNION ALL
  SELECT 3,   1,  1,    1.5   UNION ALL
  SELECT 4,   1,  NULL, 2.5   UNION ALL
  SELECT 5,   1,  1,    3.5   UNION ALL
  SELECT 6,   2,  2,    NULL  UNION ALL
  SELECT 7,   1,  1,    -0.5  UNION ALL
  SELECT 8,   1,  4,    -1.5  UNION ALL
  SELECT 9,   3,  2,    1.5   UNION ALL
  SELECT 10,  1,  3,    2.5;

CREATE TABLE TestTableWithUid4 AS
SELECT CAST(1 AS BIGINT) AS id, CAST(1 AS BIGINT) AS uid,
       CAST(NULL AS BIGINT) AS int64_val,
       CAST(NULL AS DOUBLE) AS double_val UNION ALL
  SELECT 2,   2,  NULL,    NULL   UNION ALL
  SELECT 3,   1,  NULL,    NULL   UNION ALL
  SELECT 4,   1,  NULL,    NULL   UNION ALL
  SELECT 5,   1,  NULL,    NULL   UNION ALL
  SELECT 6,   2,  NULL,    NULL   UNION ALL
  SELECT 7,   1,  NULL,    NULL;

CREATE TABLE TestTableWithoutUid AS
SELECT CAST(0 AS BIGINT) AS int64_val,
       CAST(0.0 AS DOUBLE) AS double_val UNION ALL
  SELECT 1, 1.1 UNION ALL
  SELECT 3, 3.1 UNION ALL
  SELECT 4, 4.1 UNION ALL
  SELECT 1234, 12.34;
