# Equivalent pairs the normalise stage cannot prove: the execute and test-suite stages must
# find no difference, on schema.sql's data and on every test database.

# title: join versus IN on a key
SELECT concert.year FROM concert JOIN stadium ON stadium.stadium_id = concert.stadium_id WHERE stadium.capacity > 5000;
SELECT year FROM concert WHERE stadium_id IN (SELECT stadium_id FROM stadium WHERE capacity > 5000);

# title: NOT IN over a NOT NULL column is NOT EXISTS
SELECT name FROM singer WHERE singer_id NOT IN (SELECT singer_id FROM singer_in_concert);
SELECT name FROM singer WHERE NOT EXISTS (SELECT 1 FROM singer_in_concert AS sic WHERE sic.singer_id = singer.singer_id);

# title: HAVING count(*) > 1 is >= 2
SELECT country FROM singer GROUP BY country HAVING COUNT(*) > 1;
SELECT country FROM singer GROUP BY country HAVING COUNT(*) >= 2;

# title: LIKE is case-insensitive
SELECT name FROM singer WHERE name LIKE '%joe%';
SELECT name FROM singer WHERE name LIKE '%JOE%';

# title: an extra ORDER BY when the gold query does not order
SELECT name, age FROM singer WHERE country = 'France';
SELECT name, age FROM singer WHERE country = 'France' ORDER BY age;

# title: UNION versus OR with DISTINCT
SELECT DISTINCT name FROM singer WHERE age < 30 OR age > 50;
SELECT name FROM singer WHERE age < 30 UNION SELECT name FROM singer WHERE age > 50;

# title: average as a ratio of REAL values
SELECT AVG(capacity) FROM stadium;
SELECT SUM(capacity) * 1.0 / COUNT(capacity) FROM stadium;
