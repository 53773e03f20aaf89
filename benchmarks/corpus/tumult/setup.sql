-- Data of Tumult Analytics' tutorials (opendp/tumult-analytics@1d620b03c8, doc/tutorials/).
-- The tutorials download library-members.csv, checkout-logs.csv, library_books.csv and
-- nc-zip-codes.csv from the opendp/tumult-demo-data repository, which is not available here.
-- SYNTHESISED: every table below is generated deterministically from row numbers (arithmetic
-- hashes); no value is real. What comes from the tutorials: table and column names and types
-- (Session.describe() outputs: privacy-budget-basics.rst#L96, privacy-id-basics.rst#L104), the
-- members' row count (54,217: first-steps.rst#L201), the category values the tutorials' KeySets
-- list (education levels, genders, genres), "all the age values are 6 or above"
-- (groupby-queries.rst#L193), up to three ';'-separated favourite genres
-- (simple-transformations.rst#L209), ','-separated genres in the checkouts
-- (more-with-privacy-ids.rst#L146), and the ten nc-zip-codes rows the tutorial prints
-- (simple-transformations.rst#L432). Everything else (distributions, names, titles, zip codes
-- of members, populations) is made up.

-- members: the library-members dataset (one row per member; id is unique)
CREATE TABLE members AS
WITH r AS (
  SELECT range AS i,
         (range * 2654435761 + 97) % 4294967291 AS h1,
         (range * 40503 + 11) % 65521 AS h2,
         (range * 69069 + 1) % 1000003 AS h3,
         (range * 1103515245 + 12345) % 2147483647 AS h4
  FROM range(54217)
), a AS (
  SELECT *,
         CASE WHEN h1 % 4 = 0 THEN 6 + h2 % 14                       -- children and teens
              ELSE 18 + h2 % 45 + h3 % 38 END AS age_,                -- adults, up to 100
         CAST(400 * power((h4 % 100003) / 100003.0, 2) AS INTEGER) AS name_no,
         h1 % 18 AS g1, 1 + h3 % 17 AS d2, 1 + (h3 % 17 + 1 + h4 % 16) % 17 AS d3
  FROM r
)
SELECT
  CAST(100000 + i * 7 + h1 % 7 AS INTEGER) AS id,
  ['Al', 'Be', 'Ca', 'Da', 'El', 'Fa', 'Ga', 'Ha', 'Is', 'Ja', 'Ka', 'Le', 'Ma', 'Na', 'Ol',
   'Pa', 'Ra', 'Sa', 'Ta', 'Vi'][1 + name_no % 20] ||
  ['na', 'ra', 'ton', 'lia', 'bel', 'ric', 'mon', 'dro', 'nia', 'zio', 'rin', 'lo', 'sha',
   'vin', 'ette', 'mir', 'dan', 'rio', 'lyn', 'fredo'][1 + name_no // 20] AS name,
  CAST(age_ AS INTEGER) AS age,
  CASE WHEN h3 % 100 < 48 THEN 'female' WHEN h3 % 100 < 94 THEN 'male'
       WHEN h3 % 100 < 97 THEN 'nonbinary' ELSE 'unspecified' END AS gender,
  CASE WHEN age_ < 18 THEN 'up-to-high-school'
       ELSE ['up-to-high-school', 'high-school-diploma', 'high-school-diploma',
             'bachelors-associate', 'bachelors-associate', 'bachelors-associate',
             'masters-degree', 'doctorate-professional'][1 + h4 % 8] END AS education_level,
  ['27701', '27703', '27704', '27705', '27707', '27712', '27713', '27514', '27516', '27517',
   '27511', '27513', '27519', '27560', '27503', '27278', '27522', '27509', '27581', '27601',
   '27610', '27615', '27587', '27705', '27707', '27713', '27701'][1 + h2 % 27] AS zip_code,
  CAST(h1 % 150 + CASE WHEN h3 % 40 = 0 THEN h4 % 2000 ELSE 0 END AS INTEGER) AS books_borrowed,
  -- one to three distinct genres (g1, g2, g3 differ by construction)
  concat_ws(';',
    ['Mystery/thriller/crime', 'History', 'Biographies/memoirs', 'Romance',
   'Cookbooks/food writing', 'Science fiction', 'Fantasy', 'Classics/Literature',
   'Health/wellness', 'Religion/spirituality', 'Self-help', 'True crime', 'Political',
   'Current affairs', 'Graphic novels', 'Business', 'Poetry', 'Westerns'][1 + g1],
    CASE WHEN h2 % 3 > 0 THEN ['Mystery/thriller/crime', 'History', 'Biographies/memoirs', 'Romance',
   'Cookbooks/food writing', 'Science fiction', 'Fantasy', 'Classics/Literature',
   'Health/wellness', 'Religion/spirituality', 'Self-help', 'True crime', 'Political',
   'Current affairs', 'Graphic novels', 'Business', 'Poetry', 'Westerns'][1 + (g1 + d2) % 18] END,
    CASE WHEN h2 % 3 = 2 THEN ['Mystery/thriller/crime', 'History', 'Biographies/memoirs', 'Romance',
   'Cookbooks/food writing', 'Science fiction', 'Fantasy', 'Classics/Literature',
   'Health/wellness', 'Religion/spirituality', 'Self-help', 'True crime', 'Political',
   'Current affairs', 'Graphic novels', 'Business', 'Poetry', 'Westerns'][1 + (g1 + d3) % 18] END) AS favorite_genres,
  make_date(CAST(2024 - h4 % least(age_ - 5, 15) AS INTEGER), CAST(1 + h1 % 12 AS INTEGER),
            CAST(1 + h2 % 28 AS INTEGER)) AS date_joined
FROM a;

-- the same members, as the last tutorial's Session holds them (AddRowsWithID(id_column="id"));
-- see policy.yaml
CREATE TABLE members_by_id AS SELECT * FROM members;

-- library_books: the library's catalogue (public; 150 books, isbn unique)
CREATE TABLE library_books AS
SELECT
  'Title ' || lpad(CAST(k AS VARCHAR), 3, '0') AS title,
  'Author ' || lpad(CAST(k % 90 AS VARCHAR), 2, '0') AS author,
  '978' || lpad(CAST((k * 7919 + 104729) % 10000000000 AS VARCHAR), 10, '0') AS isbn,
  CAST(1950 + (k * 37) % 74 AS INTEGER) AS publication_date,
  'Publisher ' || CAST(k % 12 AS VARCHAR) AS publisher,
  concat_ws(',',
    ['Mystery/thriller/crime', 'History', 'Romance', 'Fantasy', 'Classics/Literature',
     'Children', 'Science fiction', 'Biographies/memoirs', 'Self-help', 'Poetry'][1 + k % 10],
    CASE WHEN k % 3 > 0 THEN
    ['Mystery/thriller/crime', 'History', 'Romance', 'Fantasy', 'Classics/Literature',
     'Children', 'Science fiction', 'Biographies/memoirs', 'Self-help', 'Poetry'][1 + (k % 10 + 1 + k % 9) % 10] END) AS genres
FROM range(150) AS t(k);

-- checkouts: the checkout logs (one row per book checked out; a member may have many rows).
-- A third of the members borrow; most borrow a few books, one in 25 up to 60; the book is
-- drawn with a skew towards low book numbers (book 0 the most popular).
CREATE TABLE checkouts AS
WITH borrowers AS (
  SELECT id AS member_id, row_number() OVER (ORDER BY id) AS m FROM members WHERE id % 3 = 0
), n AS (
  SELECT member_id, m,
         CASE WHEN m % 25 = 0 THEN 1 + (m * 7919) % 60 ELSE 1 + (m * 7919) % 8 END AS n_books
  FROM borrowers
), rows_ AS (
  SELECT member_id, m, j, ((m * 1000 + j) * 2654435761) % 4294967291 AS h
  FROM n, range(60) AS t(j) WHERE j < n_books
)
SELECT
  CAST(TIMESTAMP '2022-01-01 09:00:00' + to_seconds(CAST(h % 63072000 AS BIGINT))
       AS TIMESTAMP) AS checkout_date,
  CAST(member_id AS INTEGER) AS member_id,
  b.title, b.author, b.isbn, b.publication_date, b.publisher, b.genres
FROM rows_
JOIN (SELECT row_number() OVER (ORDER BY title) - 1 AS k, * FROM library_books) AS b
  ON b.k = CAST(150 * power((rows_.h % 100003) / 100003.0, 2.5) AS INTEGER);

-- The checkouts as the privacy-ID tutorials' queries truncate them (see policy.yaml): the same
-- rows under the names the queries' enforce() constraints map to.
CREATE TABLE checkouts_max_rows_20 AS SELECT * FROM checkouts;
CREATE TABLE checkouts_max_groups_5 AS SELECT * FROM checkouts;

-- nc_zip_codes: nc-zip-codes.csv (public) after the tutorial's preprocessing
-- (simple-transformations.rst#L459: "Zip Code" renamed zip_code and cast to string, NaN
-- populations set to 0). The first ten rows are the ones the tutorial prints; the others are
-- the zip codes the synthetic members live in, with made-up populations.
CREATE TABLE nc_zip_codes AS
SELECT * FROM (VALUES
  ('27610', 'Raleigh', 'Wake County', 79924.0),
  ('28269', 'Charlotte', 'Mecklenburg County', 77248.0),
  ('28277', 'Charlotte', 'Mecklenburg County', 72132.0),
  ('28027', 'Concord', 'Cabarrus County', 68716.0),
  ('27587', 'Wake Forest', 'Wake County', 68491.0),
  ('27406', 'Greensboro', 'Guilford County', 63199.0),
  ('28215', 'Charlotte', 'Mecklenburg County', 62543.0),
  ('28078', 'Huntersville', 'Mecklenburg County', 61043.0),
  ('28173', 'Waxhaw', 'Union County', 59559.0),
  ('27858', 'Greenville', 'Pitt County', 59182.0),
  ('27701', 'Durham', 'Durham County', 25000.0),
  ('27703', 'Durham', 'Durham County', 50000.0),
  ('27704', 'Durham', 'Durham County', 40000.0),
  ('27705', 'Durham', 'Durham County', 45000.0),
  ('27707', 'Durham', 'Durham County', 48000.0),
  ('27712', 'Durham', 'Durham County', 22000.0),
  ('27713', 'Durham', 'Durham County', 55000.0),
  ('27514', 'Chapel Hill', 'Orange County', 30000.0),
  ('27516', 'Chapel Hill', 'Orange County', 35000.0),
  ('27517', 'Chapel Hill', 'Orange County', 28000.0),
  ('27511', 'Cary', 'Wake County', 40000.0),
  ('27513', 'Cary', 'Wake County', 45000.0),
  ('27519', 'Cary', 'Wake County', 60000.0),
  ('27560', 'Morrisville', 'Wake County', 35000.0),
  ('27503', 'Bahama', 'Durham County', 4000.0),
  ('27278', 'Hillsborough', 'Orange County', 30000.0),
  ('27522', 'Creedmoor', 'Granville County', 15000.0),
  ('27509', 'Butner', 'Granville County', 0.0),
  ('27581', 'Stem', 'Granville County', 3000.0),
  ('27601', 'Raleigh', 'Wake County', 9000.0),
  ('27615', 'Raleigh', 'Wake County', 45000.0)
) AS z(zip_code, City, County, Population);

-- KeySets the tutorials build from DataFrames, as public tables:
-- groupby-queries.rst#L357: the 17 (age, education_level) pairs, verbatim
CREATE TABLE teen_edu_subset_keys AS
SELECT * FROM (VALUES
  (13, 'up-to-high-school'), (14, 'up-to-high-school'), (15, 'up-to-high-school'),
  (16, 'up-to-high-school'), (17, 'up-to-high-school'), (17, 'high-school-diploma'),
  (18, 'up-to-high-school'), (18, 'high-school-diploma'), (19, 'up-to-high-school'),
  (19, 'high-school-diploma'), (19, 'bachelors-associate'), (20, 'up-to-high-school'),
  (20, 'high-school-diploma'), (20, 'bachelors-associate'), (21, 'up-to-high-school'),
  (21, 'high-school-diploma'), (21, 'bachelors-associate')
) AS k(age, education_level);

-- groupby-queries.rst#L643: names_keyset = KeySet.from_dataframe(names_df), names_df being the
-- DP output of get_groups(["name"]) (a release, public once made). STAND-IN: the noisy release
-- cannot be reproduced, so this holds the 250 names the generator above makes most frequent
-- (name_no < 250), out of the 400 it can produce.
CREATE TABLE names_keyset AS
SELECT DISTINCT
  ['Al', 'Be', 'Ca', 'Da', 'El', 'Fa', 'Ga', 'Ha', 'Is', 'Ja', 'Ka', 'Le', 'Ma', 'Na', 'Ol',
   'Pa', 'Ra', 'Sa', 'Ta', 'Vi'][1 + n % 20] ||
  ['na', 'ra', 'ton', 'lia', 'bel', 'ric', 'mon', 'dro', 'nia', 'zio', 'rin', 'lo', 'sha',
   'vin', 'ette', 'mir', 'dan', 'rio', 'lyn', 'fredo'][1 + n // 20] AS name
FROM range(250) AS t(n);

-- privacy-id-basics.rst#L235: top_five_keyset built from `top_five`, the five largest counts of
-- the DP release of the query at #L171. STAND-IN: the five books the generator makes most
-- popular (book numbers 0 to 4), not computed from the private rows.
CREATE TABLE top_five_books AS
SELECT title, author, isbn
FROM (SELECT row_number() OVER (ORDER BY title) - 1 AS k, * FROM library_books) WHERE k < 5;
