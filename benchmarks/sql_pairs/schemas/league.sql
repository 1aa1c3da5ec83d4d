-- league: teams, players and the fixtures of one season of a six-team amateur football league.
-- Written for the SQL equivalence benchmark (see ../README.md); invented data.
-- SQLite dialect; run on an empty database. Heights are in metres; the goals of the fixtures
-- of round 5 are NULL (not played yet); a player without a team is a free agent.

PRAGMA foreign_keys = ON;

CREATE TABLE team (
  team_id     INTEGER PRIMARY KEY,
  name        TEXT NOT NULL UNIQUE,
  city        TEXT,
  founded     INTEGER
);

CREATE TABLE player (
  player_id   INTEGER PRIMARY KEY,
  reg_no      INTEGER UNIQUE,               -- league registration number, NULL until registered
  name        TEXT NOT NULL,
  team_id     INTEGER REFERENCES team(team_id),
  position    TEXT CHECK (position IN ('GK','DF','MF','FW')),
  shirt       INTEGER,
  height      REAL,
  goals       INTEGER NOT NULL DEFAULT 0
);

CREATE TABLE fixture (
  fixture_id  INTEGER PRIMARY KEY,
  round       INTEGER NOT NULL,
  home_id     INTEGER NOT NULL REFERENCES team(team_id),
  away_id     INTEGER NOT NULL REFERENCES team(team_id),
  home_goals  INTEGER,
  away_goals  INTEGER
);

INSERT INTO team VALUES
  (1, 'Harbour Rovers',      'Porto', 1906),
  (2, 'Ironbridge Athletic', 'Leeds', 1889),
  (3, 'Kestrel United',      'Porto', 1921),
  (4, 'Millbrook Town',      'Cork',  1947),
  (5, 'Northgate City',      'Leeds', 1898),
  (6, 'Saltmarsh FC',        NULL,    1963);

INSERT INTO player VALUES
  (1,  4401, 'Rui Almeida',      1, 'GK',  1, 1.88,  0),
  (2,  4402, 'Tiago Costa',      1, 'DF',  4, 1.83,  2),
  (3,  4403, 'Bruno Matos',      1, 'DF',  5, 1.80,  1),
  (4,  4404, 'Nuno Pires',       1, 'MF',  8, 1.76,  6),
  (5,  4405, 'Hugo Leal',        1, 'MF', 10, 1.74,  9),
  (6,  4406, 'Andre Faria',      1, 'FW',  9, 1.81, 19),
  (7,  4407, 'Pedro Sousa',      1, 'FW', 11, 1.78, 11),
  (8,  4511, 'Jack Hollins',     2, 'GK',  1, 1.91,  0),
  (9,  4512, 'Sam Kerrigan',     2, 'DF',  3, 1.85,  1),
  (10, 4513, 'Tom Pryce',        2, 'DF',  6, 1.79,  3),
  (11, 4514, 'Lewis Grant',      2, 'MF',  7, 1.72,  5),
  (12, 4515, 'Callum Reid',      2, 'FW',  9, 1.80, 15),
  (13, 4516, 'Owen Fitch',       2, 'FW', 12, 1.77,  4),
  (14, 4620, 'Diogo Neves',      3, 'GK', 13, 1.86,  0),
  (15, 4621, 'Joao Ramos',       3, 'DF',  2, 1.82,  2),
  (16, 4622, 'Ruben Dias Lima',  3, 'MF',  6, 1.75,  7),
  (17, 4623, 'Vitor Salgado',    3, 'MF', 14, 1.71,  3),
  (18, 4624, 'Marco Teixeira',   3, 'FW',  9, 1.79, 13),
  (19, 4730, 'Cian Murphy',      4, 'GK',  1, 1.87,  0),
  (20, 4731, 'Eoin Walsh',       4, 'DF',  5, 1.84,  1),
  (21, 4732, 'Darragh Byrne',    4, 'MF',  8, 1.73,  8),
  (22, 4733, 'Fionn Kelly',      4, 'FW', 10, 1.76, 12),
  (23, 4840, 'Ryan Ashworth',    5, 'GK', 22, 1.90,  0),
  (24, 4841, 'Kieran Platt',     5, 'DF',  4, 1.81,  2),
  (25, 4842, 'Jordan Mellor',    5, 'MF', 11, 1.70,  4),
  (26, 4843, 'Ashley Dunne',     5, 'FW',  7, 1.78, 17),
  (27, 4950, 'Piet Vos',         6, 'GK',  1, 1.89,  0),
  (28, 4951, 'Lars Visser',      6, 'DF',  3, 1.83,  1),
  (29, 4952, 'Milan Jansen',     6, 'FW',  9, 1.75, 10),
  (30, 4999, 'Ezra Cole',        NULL, 'MF', NULL, 1.74, 3);

INSERT INTO fixture VALUES
  (1,  1, 6, 1, 2, 1),
  (2,  1, 2, 5, 0, 0),
  (3,  1, 3, 4, 3, 3),
  (4,  2, 6, 2, 1, 0),
  (5,  2, 3, 1, 2, 2),
  (6,  2, 4, 5, 1, 3),
  (7,  3, 6, 3, 0, 2),
  (8,  3, 4, 2, 4, 1),
  (9,  3, 5, 1, 1, 1),
  (10, 4, 6, 4, 3, 1),
  (11, 4, 5, 3, 2, 2),
  (12, 4, 1, 2, 0, 4),
  (13, 5, 6, 5, NULL, NULL),
  (14, 5, 1, 4, NULL, NULL),
  (15, 5, 2, 3, NULL, NULL);
