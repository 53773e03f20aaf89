-- SmartNoise SQL's PUMS test datasets (opendp/smartnoise-sdk@81d1351b38, datasets/ and
-- sql/tests/setup/dataloader/db.py). The CSVs are the repository's own files, byte for byte:
-- PUMS.csv (the copy in sql_examples/data), PUMS_pid.csv, PUMS_dup.csv and PUMS_null.csv (beside
-- this file). SmartNoise's tests address every dataset as PUMS.PUMS (schema PUMS, table PUMS) and
-- load a different metadata file per dataset; here each (data, metadata) pair is one table of
-- schema PUMS, named after the dataset, and queries.yaml states each rename. Columns get the
-- types their metadata declares (string columns hold the CSV's digits as text).
CREATE SCHEMA PUMS;

-- datasets/PUMS.csv with datasets/PUMS.yaml (row_privacy, rows 1000)
CREATE TABLE PUMS.PUMS AS
SELECT CAST(age AS INTEGER) AS age, sex, educ, race, CAST(income AS BIGINT) AS income, married
FROM read_csv('{repo}/sql_examples/data/PUMS.csv', header = true, all_varchar = true);

-- datasets/PUMS_pid.csv with datasets/PUMS_pid.yaml (pid is the private_id; max_ids default 1)
CREATE TABLE PUMS.PUMS_pid AS
SELECT CAST(age AS INTEGER) AS age, sex, educ, race, CAST(CAST(income AS DOUBLE) AS BIGINT) AS income,
       married, CAST(pid AS INTEGER) AS pid
FROM read_csv('{here}/PUMS_pid.csv', header = true, all_varchar = true);

-- datasets/PUMS_dup.csv with datasets/PUMS_dup.yaml (1,948 rows; each pid 1-4 times; max_ids 1)
CREATE TABLE PUMS.PUMS_dup AS
SELECT CAST(age AS INTEGER) AS age, sex, educ, race, CAST(income AS BIGINT) AS income, married,
       CAST(pid AS INTEGER) AS pid
FROM read_csv('{here}/PUMS_dup.csv', header = true, all_varchar = true);

-- datasets/PUMS_null.csv (PUMS_dup with NULLs in some cells, pid included) with
-- datasets/PUMS_dup.yaml, which is what tests/setup/dataloader/db.py loads for PUMS_null
CREATE TABLE PUMS.PUMS_null AS
SELECT CAST(CAST(age AS DOUBLE) AS INTEGER) AS age, sex, educ, race,
       CAST(CAST(income AS DOUBLE) AS BIGINT) AS income, married,
       CAST(CAST(pid AS DOUBLE) AS INTEGER) AS pid
FROM read_csv('{here}/PUMS_null.csv', header = true, all_varchar = true);

-- datasets/PUMS_null.csv as table PUMS.PUMS_null of datasets/PUMS_two_table.yaml (max_ids 3),
-- used by engines/test_pandas_dict.py
CREATE TABLE PUMS.PUMS_null_two_table AS SELECT * FROM PUMS.PUMS_null;

-- Metadata overrides the tests make in code (the data is unchanged; policy.yaml states each):
-- odometer/test_odometer.py, query/test_opt_rewrite.py: PUMS_pid with row_privacy = True
CREATE TABLE PUMS.PUMS_pid_row AS SELECT * FROM PUMS.PUMS_pid;
-- engines/test_db_count.py: max_ids = 9 on PUMS_pid, PUMS_dup and PUMS_null
CREATE TABLE PUMS.PUMS_pid_max_ids_9 AS SELECT * FROM PUMS.PUMS_pid;
CREATE TABLE PUMS.PUMS_dup_max_ids_9 AS SELECT * FROM PUMS.PUMS_dup;
CREATE TABLE PUMS.PUMS_null_max_ids_9 AS SELECT * FROM PUMS.PUMS_null;
-- query/test_query_error.py: income.upper = None, income.lower = None on PUMS_pid
CREATE TABLE PUMS.PUMS_pid_income_no_upper AS SELECT * FROM PUMS.PUMS_pid;
CREATE TABLE PUMS.PUMS_pid_income_no_lower AS SELECT * FROM PUMS.PUMS_pid;
-- query/test_grouping_clamp.py: income.upper = 100 on PUMS_pid
CREATE TABLE PUMS.PUMS_pid_income_upper_100 AS SELECT * FROM PUMS.PUMS_pid;
-- query/test_having.py TestOtherTypes: PUMS with sex: int, educ: int, married: bool
CREATE TABLE PUMS.PUMS_other_types AS
SELECT age, CAST(sex AS INTEGER) AS sex, CAST(educ AS INTEGER) AS educ, race, income,
       CAST(CAST(married AS INTEGER) AS BOOLEAN) AS married
FROM PUMS.PUMS;

-- PUMS_large: SYNTHESISED. The real datasets/PUMS_large.csv is a Git LFS object not available
-- here. This table has the columns and types of datasets/PUMS_large.yaml and 1,223,950 rows (the
-- tests expect a count between 1,223,900 and 1,224,000), one per PersonID; the values are a
-- deterministic arithmetic hash of the row number, not census data (only COUNT queries use it).
CREATE TABLE PUMS.PUMS_large AS
WITH r AS (SELECT range AS i, (range * 2654435761) % 4294967291 AS h FROM range(1, 1223951))
SELECT CAST(i AS INTEGER) AS PersonID,
       CAST(1 + h % 56 AS INTEGER) AS state,
       lpad(CAST((h // 56) % 2400 AS VARCHAR), 5, '0') AS puma,
       CAST((h // 7) % 2 AS VARCHAR) AS sex,
       CAST((h // 11) % 96 AS INTEGER) AS age,
       CAST(1 + (h // 13) % 16 AS VARCHAR) AS educ,
       CASE WHEN (h // 17) % 4 = 0 THEN 0.0 ELSE ((h // 19) % 2500) * 100.0 END AS income,
       (h // 23) % 6 = 0 AS latino,
       (h // 29) % 8 = 0 AS black,
       (h // 31) % 16 = 0 AS asian,
       (h // 37) % 2 = 0 AS married
FROM r;
