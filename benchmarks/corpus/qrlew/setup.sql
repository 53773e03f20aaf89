-- Qrlew's test table `extract.census`, on which pyqrlew's DP test runs its query list
-- (Qrlew/pyqrlew@b352078b69:tests/test_base_queries.py#L67, test_queries_differential_privacy,
-- dataset PostgreSQL().extract(): python/pyqrlew/io/postgresql.py#L133). The queries name the
-- table `census` (the test resolves it in schema `extract`), so it is created as `census`.
--
-- SYNTHESISED: 199 rows made deterministically from the row number (arithmetic hashes), not
-- the real rows. What is taken from the source is the table's shape, which is what Qrlew's
-- test derives its privacy setup from (ranges=True, possible_values_threshold=20, see
-- policy.yaml): column names and types (tests/ressources/install_db/install_postgres.sql at
-- Qrlew/pyqrlew@01f8289674: age integer, fnlwgt varchar, ...), the row count (199), and for each
-- column its minimum and maximum, its NULL count and, for columns with few values, the exact set
-- of values, all as in the extract's census rows (Adult census rows with capital_loss >= 2231;
-- the file is tests/ressources/install_db/extract_census.csv at Qrlew/pyqrlew@8f6c2a5254,
-- whose AVG(age) = 48.005155 over 194 non-NULL ages is the one pyqrlew's docstring prints).
-- The joint distribution (which values go together in a row) is synthetic; education and
-- education_num keep Adult's one-to-one pairing. The extract's `beacon` table is not created:
-- only commented-out queries of the list read it.
CREATE TABLE census AS
WITH r AS (
  SELECT range AS i,
         (range * 2654435761 + 97) % 4294967291 AS h1,
         (range * 40503 + 11) % 65521 AS h2
  FROM range(199)
)
SELECT
  -- [20, 90], 5 NULLs (as in the extract)
  CASE WHEN i % 40 = 7 THEN NULL ELSE CAST(20 + (i * 37 + 11) % 71 AS INTEGER) END AS age,
  ['?', 'Federal-gov', 'Local-gov', 'Private', 'Self-emp-inc', 'Self-emp-not-inc',
   'State-gov', 'Private', 'Private', 'Private', 'Private'][1 + (i * 7 + 3) % 11] AS workclass,
  -- digits as text, as the extract stores them; [25322, 456062]
  CASE WHEN i = 0 THEN '25322' WHEN i = 1 THEN '456062'
       ELSE CAST(25323 + h1 % 430738 AS VARCHAR) END AS fnlwgt,
  ['1st-4th', '5th-6th', '7th-8th', '9th', '10th', '11th', '12th', 'HS-grad', 'Some-college',
   'Assoc-voc', 'Assoc-acdm', 'Bachelors', 'Masters', 'Prof-school',
   'Doctorate'][1 + (i * 4 + 1) % 15] AS education,
  CAST(2 + (i * 4 + 1) % 15 AS INTEGER) AS education_num,
  -- 4 NULLs (as in the extract)
  CASE WHEN i % 50 = 21 THEN NULL
       ELSE ['Divorced', 'Married-civ-spouse', 'Married-spouse-absent', 'Never-married',
             'Separated', 'Widowed', 'Married-civ-spouse', 'Never-married',
             'Divorced'][1 + (i * 5 + 2) % 9] END AS marital_status,
  ['?', 'Adm-clerical', 'Craft-repair', 'Exec-managerial', 'Farming-fishing',
   'Handlers-cleaners', 'Machine-op-inspct', 'Other-service', 'Prof-specialty',
   'Protective-serv', 'Sales', 'Tech-support', 'Transport-moving'][1 + (i * 5 + h2) % 13]
    AS occupation,
  ['Husband', 'Not-in-family', 'Other-relative', 'Own-child', 'Unmarried',
   'Wife', 'Husband'][1 + (i * 3 + 1) % 7] AS relationship,
  ['Asian-Pac-Islander', 'Black', 'White', 'White', 'White', 'White',
   'White'][1 + (i * 3 + 2) % 7] AS race,
  CASE WHEN (i * 7 + h2) % 3 = 0 THEN 'Female' ELSE 'Male' END AS sex,
  -- always 0 in the extract
  0 AS capital_gain,
  [2231, 2238, 2246, 2258, 2267, 2282, 2339, 2352, 2377, 2392, 2415, 2444, 2457, 2467, 2472,
   2489, 2547, 2559, 2603, 2754, 2824, 3004, 3683, 3770, 3900, 4356][1 + (i * 7 + 5) % 26]
    AS capital_loss,
  [6, 8, 10, 12, 15, 18, 20, 25, 26, 28, 30, 32, 35, 36, 38, 39, 40, 42, 44, 45, 48, 50, 52,
   55, 60, 62, 65, 67, 70, 72, 75, 76, 80, 84, 90, 99, 40, 40, 40, 40,
   40][1 + (i * 13 + 4) % 41] AS hours_per_week,
  CASE WHEN i % 3 <> 0 THEN 'United-States'
       ELSE ['?', 'Canada', 'China', 'Greece', 'India', 'Mexico', 'Philippines', 'South',
             'Taiwan', 'Trinadad&Tobago', 'United-States', 'Vietnam'][1 + (i // 3 * 5 + 1) % 12]
  END AS native_country,
  CASE WHEN (i * 11 + h1) % 4 = 0 THEN '>50K' ELSE '<=50K' END AS income
FROM r;
