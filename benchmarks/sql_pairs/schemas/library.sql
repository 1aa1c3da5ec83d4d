-- library: branches, books, members and loans of a small public library.
-- Written for the SQL equivalence benchmark (see ../README.md); invented data.
-- SQLite dialect; run on an empty database. shelf is a shelf code kept as TEXT (its values
-- look like numbers); fines are in euros.

PRAGMA foreign_keys = ON;

CREATE TABLE branch (
  branch_id   INTEGER PRIMARY KEY,
  name        TEXT NOT NULL UNIQUE,
  city        TEXT NOT NULL
);

CREATE TABLE book (
  book_id     INTEGER PRIMARY KEY,
  isbn        TEXT UNIQUE,                 -- NULL for old donations without an ISBN
  title       TEXT NOT NULL,
  author      TEXT,
  pub_year    INTEGER,
  pages       INTEGER,
  price       REAL,
  shelf       TEXT
);

CREATE TABLE member (
  member_id   INTEGER PRIMARY KEY,
  name        TEXT NOT NULL,
  branch_id   INTEGER REFERENCES branch(branch_id),
  joined_year INTEGER,
  tier        TEXT CHECK (tier IN ('basic','plus','staff'))
);

CREATE TABLE loan (
  loan_id     INTEGER PRIMARY KEY,
  book_id     INTEGER NOT NULL REFERENCES book(book_id),
  member_id   INTEGER NOT NULL REFERENCES member(member_id),
  loan_year   INTEGER NOT NULL,
  days        INTEGER,
  fine        REAL
);

INSERT INTO branch VALUES
  (1, 'Central',   'Leeds'),
  (2, 'Riverside', 'Leeds'),
  (3, 'Hillcrest', 'York'),
  (4, 'Docklands', 'Hull');

INSERT INTO book VALUES
  (1,  '978-0-11-402017-3', 'The Salt Road',           'Ursula Vance',   2014, 312, 18.5,  '3'),
  (2,  '978-0-11-402031-9', 'Glass Harbour',           'Ursula Vance',   2017, 288, 21.0,  '3'),
  (3,  '978-0-11-402055-5', 'Winter Ledger',           'Ursula Vance',   2019, 344, 24.99, '3'),
  (4,  '978-0-11-402078-4', 'The Quiet Meridian',      'Ursula Vance',   2022, 401, 27.5,  '4'),
  (5,  '978-1-84-115220-6', 'A Field Guide to Moss',   'Tobias Crane',   2009, 196, 32.0,  '7'),
  (6,  '978-1-84-115246-6', 'Lichens of the North',    'Tobias Crane',   2016, 224, 35.0,  '7'),
  (7,  '978-0-30-659981-2', 'Counting Sheep',          'Maya Okonjo',    2020,  48, 12.99, '1'),
  (8,  '978-0-30-660004-4', 'Counting Stars',          'Maya Okonjo',    2023,  52, 12.99, '1'),
  (9,  '978-0-55-238447-1', 'The Iron Orchard',        'Diego Salas',    2011, 512, 22.0,  '5'),
  (10, '978-0-55-238470-9', 'Ashes of Tamrin',         'Diego Salas',    2015, 498, 23.5,  '5'),
  (11, '978-0-55-238493-8', 'The Last Cartographer',   'Diego Salas',    2018, 476, 25.0,  '5'),
  (12, '978-1-40-882716-0', 'Practical Bread',         'Hanne Dahl',     2012, 256, 28.0,  '8'),
  (13, '978-1-40-882739-9', 'Practical Soup',          'Hanne Dahl',     2021, 240, 29.0,  '8'),
  (14, '978-0-67-002311-5', 'Tides and Moons',         'Ravi Menon',     2005, 380, 19.5,  '6'),
  (15, '978-0-67-002334-4', 'The Physics of Rivers',   'Ravi Menon',     2013, 420, 38.0,  '6'),
  (16, '978-1-78-470152-7', 'Small Rooms',             'Clara Jaeger',   2019, 164, 14.0,  '2'),
  (17, '978-1-78-470175-6', 'Letters to Nobody',       'Clara Jaeger',   2024, 182, 16.5,  '2'),
  (18, '978-0-09-954318-2', 'Knots for Sailors',       NULL,             1998, 120,  9.5,  '9'),
  (19, NULL,                'Parish Records 1850-1900', 'Edwin Hollis',  1962, 610, NULL,  '9'),
  (20, '978-0-09-954341-0', 'A Year of Birds',         'Tobias Crane',   2021, 268, 30.5,  '7');

INSERT INTO member VALUES
  (1,  'Alice Thorne',   1, 2012, 'plus'),
  (2,  'Ben Okoro',      1, 2015, 'basic'),
  (3,  'Chloe Martin',   1, 2018, 'basic'),
  (4,  'Dev Patel',      1, 2021, 'staff'),
  (5,  'Erin Walsh',     2, 2010, 'plus'),
  (6,  'Felix Braun',    2, 2016, 'basic'),
  (7,  'Grace Liu',      2, 2019, NULL),
  (8,  'Hugo Fernandes', 2, 2023, 'basic'),
  (9,  'Isla McKay',     3, 2013, 'plus'),
  (10, 'Jamal Wright',   3, 2017, 'basic'),
  (11, 'Kira Sokolova',  3, 2022, 'staff'),
  (12, 'Liam Doherty',   4, 2011, 'basic'),
  (13, 'Mina Yilmaz',    4, 2020, 'plus'),
  (14, 'Nils Eriksen',   4, 2024, 'basic');

INSERT INTO loan VALUES
  (1,  1,  1,  2022, 14, NULL),
  (2,  5,  1,  2022, 21, 1.5),
  (3,  9,  2,  2022, 28, NULL),
  (4,  12, 3,  2022, 14, NULL),
  (5,  7,  4,  2022,  7, NULL),
  (6,  2,  5,  2022, 14, NULL),
  (7,  14, 6,  2022, 35, 4.2),
  (8,  10, 9,  2022, 14, NULL),
  (9,  16, 10, 2022, 21, NULL),
  (10, 3,  12, 2022, 14, 0.8),
  (11, 1,  1,  2023, 14, NULL),
  (12, 6,  2,  2023, 21, NULL),
  (13, 11, 3,  2023, 28, 2.6),
  (14, 8,  5,  2023,  7, NULL),
  (15, 15, 7,  2023, 14, NULL),
  (16, 4,  9,  2023, 21, NULL),
  (17, 13, 11, 2023, 14, NULL),
  (18, 17, 13, 2023, 28, 3.0),
  (19, 9,  14, 2023, 14, NULL),
  (20, 1,  8,  2024, 14, NULL),
  (21, 20, 1,  2024, 21, NULL),
  (22, 10, 2,  2024, 14, NULL),
  (23, 2,  4,  2024, 14, NULL),
  (24, 5,  6,  2024, 42, 6.1),
  (25, 3,  7,  2024, 14, NULL),
  (26, 9,  10, 2024, 21, NULL),
  (27, 12, 12, 2024, 14, NULL),
  (28, 4,  13, 2024, 28, 1.2),
  (29, 1,  11, 2024, 14, NULL),
  (30, 18, 14, 2024,  7, NULL);
