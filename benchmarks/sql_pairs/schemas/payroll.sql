-- payroll: departments, employees and weekly timesheets of a small company, plus contractors
-- and their invoices as imported from a spreadsheet.
-- Written for the SQL equivalence benchmark (see ../README.md); invented data.
-- SQLite dialect; run on an empty database. Salaries and invoice amounts are whole euros.
-- contractor has NO key: a contractor_id may repeat (one row per contract), and
-- invoice.contractor_id therefore cannot be declared a foreign key.

PRAGMA foreign_keys = ON;

CREATE TABLE dept (
  code        TEXT NOT NULL PRIMARY KEY,
  title       TEXT NOT NULL,
  budget      INTEGER
);

CREATE TABLE employee (
  emp_id      INTEGER PRIMARY KEY,
  name        TEXT NOT NULL,
  dept_code   TEXT NOT NULL REFERENCES dept(code),
  mgr_id      INTEGER REFERENCES employee(emp_id),
  salary      INTEGER NOT NULL,
  bonus       REAL
);

CREATE TABLE timesheet (
  emp_id      INTEGER NOT NULL REFERENCES employee(emp_id),
  week        INTEGER NOT NULL,
  hours       INTEGER NOT NULL,
  PRIMARY KEY (emp_id, week)
);

CREATE TABLE contractor (
  contractor_id INTEGER,
  name          TEXT,
  dept_code     TEXT,
  day_rate      REAL,
  days          INTEGER
);

CREATE TABLE invoice (
  invoice_no    INTEGER PRIMARY KEY,
  contractor_id INTEGER NOT NULL,
  month         TEXT NOT NULL,
  amount        INTEGER NOT NULL
);

INSERT INTO dept VALUES
  ('ENG', 'Engineering', 900000),
  ('OPS', 'Operations',  420000),
  ('FIN', 'Finance',     350000),
  ('SAL', 'Sales',       610000),
  ('HR',  'People',      240000);

INSERT INTO employee VALUES
  (1,  'Helen Marsh',  'ENG', NULL, 150000, 15000.0),
  (2,  'Victor Lamb',  'ENG', 1,    109200,  8000.0),
  (3,  'Nadia Perez',  'ENG', 2,     86400,  4000.0),
  (4,  'Owen Clarke',  'ENG', 2,     79200,  NULL),
  (5,  'Rita Gomez',   'ENG', 2,     74400,  3500.0),
  (6,  'Sven Olsen',   'OPS', 1,     96000,  6000.0),
  (7,  'Tara Quinn',   'OPS', 6,     61200,  NULL),
  (8,  'Umar Javed',   'OPS', 6,     57600,  2000.0),
  (9,  'Wendy Cho',    'FIN', 1,     98400,  7000.0),
  (10, 'Xavier Diaz',  'FIN', 9,     68400,  2500.0),
  (11, 'Yusuf Adam',   'FIN', 9,     64800,  NULL),
  (12, 'Zoe Baker',    'SAL', 1,     92400,  9000.0),
  (13, 'Aaron Webb',   'SAL', 12,    66000,  4500.0),
  (14, 'Bella Shaw',   'SAL', 12,    62400,  5200.0),
  (15, 'Carl Young',   'SAL', 12,    58800,  3100.0),
  (16, 'Dina Ross',    'HR',  1,     81600,  3000.0),
  (17, 'Eli Stone',    'HR',  16,    55200,  NULL),
  (18, 'Fay Moore',    'OPS', 6,     60000,  1500.0);

INSERT INTO timesheet VALUES
  (3, 1, 40), (3, 2, 42), (3, 3, 38), (3, 4, 41),
  (4, 1, 40), (4, 2, 40), (4, 3, 40), (4, 4, 38),
  (7, 1, 37), (7, 2, 39), (7, 3, 44),
  (8, 1, 45), (8, 2, 45), (8, 3, 45), (8, 4, 36),
  (10, 1, 40), (10, 2, 36),
  (13, 1, 42), (13, 2, 44), (13, 3, 40), (13, 4, 39),
  (14, 1, 35), (14, 2, 40), (14, 3, 38), (14, 4, 37),
  (17, 1, 30), (17, 2, 32);

INSERT INTO contractor VALUES
  (101, 'Ivy Chen',    'ENG', 520.0, 26),
  (102, 'Jon Park',    'ENG', 480.0, 35),
  (103, 'Kai Muller',  'OPS', 310.0, 18),
  (104, 'Lena Ortiz',  'FIN', 450.0, 12),
  (105, 'Mo Farah',    'SAL', 275.0, 40),
  (106, 'Nina Berg',   NULL,  390.0,  9),
  (107, 'Omar Aziz',   'ENG', 610.0, 48),
  (108, 'Pia Lund',    'OPS', NULL,  15),
  (109, 'Quentin Roy', 'SAL', 295.0, NULL),
  (110, 'Rosa Vidal',  'HR',  350.0, 20),
  (111, 'Sam Idris',   'FIN', 505.0, 27),
  (112, 'Tove Ek',     'ENG', 455.0,  6);

INSERT INTO invoice VALUES
  (1,  101, '2024-01', 6240),
  (2,  101, '2024-02', 7280),
  (3,  102, '2024-01', 8160),
  (4,  102, '2024-02', 8640),
  (5,  103, '2024-02', 5580),
  (6,  104, '2024-01', 2700),
  (7,  104, '2024-03', 2700),
  (8,  105, '2024-03', 11000),
  (9,  106, '2024-02', 3510),
  (10, 107, '2024-01', 9760),
  (11, 107, '2024-02', 9150),
  (12, 107, '2024-03', 10370),
  (13, 110, '2024-03', 7000),
  (14, 111, '2024-02', 13635),
  (15, 112, '2024-03', 2730);
