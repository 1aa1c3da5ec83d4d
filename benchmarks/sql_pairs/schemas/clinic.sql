-- clinic: wards, doctors, patients and visits of a small outpatient clinic.
-- Written for the SQL equivalence benchmark (see ../README.md); invented data.
-- SQLite dialect; run on an empty database. Fees are whole euros, visit_day is ISO-8601 text.

PRAGMA foreign_keys = ON;

CREATE TABLE ward (
  ward_id     INTEGER PRIMARY KEY,
  name        TEXT NOT NULL UNIQUE,
  floor       INTEGER NOT NULL,
  beds        INTEGER
);

CREATE TABLE doctor (
  doctor_id   INTEGER PRIMARY KEY,
  name        TEXT NOT NULL,
  ward_id     INTEGER REFERENCES ward(ward_id),      -- NULL: a locum without a ward
  grade       TEXT NOT NULL CHECK (grade IN ('junior','senior','consultant')),
  start_year  INTEGER,
  salary      REAL
);

CREATE TABLE patient (
  patient_id  INTEGER PRIMARY KEY,
  name        TEXT NOT NULL,
  birth_year  INTEGER,
  city        TEXT
);

CREATE TABLE visit (
  visit_id    INTEGER PRIMARY KEY,
  patient_id  INTEGER NOT NULL REFERENCES patient(patient_id),
  doctor_id   INTEGER REFERENCES doctor(doctor_id),   -- NULL: seen by a nurse only
  visit_day   TEXT NOT NULL,
  fee         INTEGER NOT NULL,
  minutes     REAL
);

INSERT INTO ward VALUES
  (1, 'Cardiology',   2, 24),
  (2, 'Oncology',     3, 18),
  (3, 'Paediatrics',  1, 30),
  (4, 'Neurology',    3, 16),
  (5, 'Orthopaedics', 2, NULL);

INSERT INTO doctor VALUES
  (1,  'Amara Okafor',   1,    'consultant', 2004, 128400.0),
  (2,  'Bram de Vries',  1,    'senior',     2012,  96250.5),
  (3,  'Chen Wei',       2,    'consultant', 2008, 131900.0),
  (4,  'Dalia Haddad',   2,    'junior',     2019,  61800.0),
  (5,  'Emil Lindqvist', 3,    'senior',     2011,  92400.0),
  (6,  'Farah Qureshi',  3,    'junior',     2021,  58350.0),
  (7,  'Gustavo Reyes',  4,    'consultant', 2006, 125700.0),
  (8,  'Hana Sato',      4,    'senior',     2015,  88900.0),
  (9,  'Ivo Petrov',     5,    'junior',     2020,  60100.0),
  (10, 'Jonah Mensah',   5,    'senior',     2014,  90750.0),
  (11, 'Katya Ivanova',  NULL, 'junior',     2022,  57600.0),
  (12, 'Luis Ortega',    1,    'junior',     2018,  63200.0);

INSERT INTO patient VALUES
  (1,  'Ruth Adeyemi',   1958, 'Bristol'),
  (2,  'Tomasz Nowak',   1984, 'Bath'),
  (3,  'Leila Farouk',   1991, 'Bristol'),
  (4,  'Oscar Brennan',  2012, 'Bath'),
  (5,  'Mei Lin',        1977, 'Bristol'),
  (6,  'Ana Souza',      1969, 'Swindon'),
  (7,  'George Kim',     1990, 'Bristol'),
  (8,  'Priya Nair',     2001, 'Bath'),
  (9,  'Samuel Osei',    1949, 'Swindon'),
  (10, 'Ines Duarte',    1988, 'Bristol'),
  (11, 'Noah Fischer',   2016, NULL),
  (12, 'Zara Ahmed',     1995, 'Bath'),
  (13, 'Pavel Horak',    1963, 'Bristol'),
  (14, 'Elena Rossi',    NULL, 'Swindon'),
  (15, 'Kwame Boateng',  1972, 'Bath');

INSERT INTO visit VALUES
  (1,  1,  1,  '2024-01-08', 160, 30.0),
  (2,  1,  2,  '2024-01-22', 110, 20.0),
  (3,  2,  3,  '2024-01-09', 150, 45.0),
  (4,  3,  5,  '2024-01-15', 105, 20.0),
  (5,  4,  6,  '2024-01-17',  70, 15.0),
  (6,  5,  7,  '2024-02-02', 175, 40.0),
  (7,  6,  3,  '2024-02-05', 170, 50.0),
  (8,  7,  8,  '2024-02-07', 120, 25.0),
  (9,  8,  9,  '2024-02-12',  65, 15.0),
  (10, 9,  1,  '2024-02-14', 165, 35.0),
  (11, 10, 10, '2024-02-20', 115, 20.0),
  (12, 11, 6,  '2024-02-26',  75, 12.5),
  (13, 12, 4,  '2024-03-01',  80, 15.0),
  (14, 14, 11, '2024-03-04',  60, 10.0),
  (15, 2,  3,  '2024-03-06', 160, 40.0),
  (16, 3,  12, '2024-03-11',  85, 22.5),
  (17, 5,  2,  '2024-03-13', 120, 25.0),
  (18, 6,  7,  '2024-03-18', 180, 55.0),
  (19, 9,  5,  '2024-03-20', 100, 20.0),
  (20, 1,  10, '2024-03-27', 130, 27.5),
  (21, 7,  3,  '2024-04-02', 140, 35.0),
  (22, 10, 8,  '2024-04-08', 110, 20.0),
  (23, 12, 9,  '2024-04-10',  90, 17.5),
  (24, 4,  4,  '2024-04-15',  65, 12.5),
  (25, 8,  12, '2024-04-22',  80, 20.0),
  (26, 11, 5,  '2024-04-24', 120, 30.0),
  (27, 14, 2,  '2024-05-02', 105, 22.5),
  (28, 2,  7,  '2024-05-06', 165, 45.0),
  (29, 9,  1,  '2024-05-13', 155, 40.0),
  (30, 6,  10, '2024-05-20', 130, 27.5);
