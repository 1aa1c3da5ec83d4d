-- The schema and data the SQL fixture tests run on (tests/test_sql_fixtures.py).
CREATE TABLE stadium (
  stadium_id INTEGER PRIMARY KEY,
  name       TEXT,
  capacity   INTEGER
);
CREATE TABLE singer (
  singer_id  INTEGER PRIMARY KEY,
  name       TEXT NOT NULL,
  country    TEXT,
  age        INTEGER,
  song_year  TEXT
);
CREATE TABLE concert (
  concert_id INTEGER PRIMARY KEY,
  stadium_id INTEGER REFERENCES stadium(stadium_id),
  year       TEXT,
  theme      TEXT
);
CREATE TABLE singer_in_concert (
  concert_id INTEGER NOT NULL REFERENCES concert(concert_id),
  singer_id  INTEGER NOT NULL REFERENCES singer(singer_id),
  PRIMARY KEY (concert_id, singer_id)
);
INSERT INTO stadium VALUES (1, 'Stark''s Park', 10104), (2, 'Glebe Park', 3960),
  (3, 'Somerset Park', 11998), (4, 'Balmoor', 4000);
INSERT INTO singer VALUES (1, 'Joe Sharp', 'Netherlands', 52, '1992'),
  (2, 'Timbaland', 'United States', 32, '2008'), (3, 'Justin Brown', 'France', 29, '2013'),
  (4, 'Rose White', 'France', 41, '2003'), (5, 'John Nizinik', 'France', 43, '2014'),
  (6, 'Tribal King', 'France', 25, '2016');
INSERT INTO concert VALUES (1, 1, '2014', 'Free choice'), (2, 2, '2014', 'Free choice 2'),
  (3, 2, '2015', 'Bleeding Love'), (4, 3, '2014', 'Wide Awake'), (5, 3, '2015', 'Happy Tonight');
INSERT INTO singer_in_concert VALUES (1, 2), (1, 3), (1, 5), (2, 3), (2, 6), (3, 5),
  (4, 4), (5, 6), (5, 3);
