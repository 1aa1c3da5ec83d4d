# Pairs the normalise stage must call equivalent (identical normal forms), on schema.sql.
# Each `# title:` starts a pair: the gold query, then the predicted one, each ending in `;`.

# title: letter case, quoting and whitespace
SELECT name FROM singer WHERE age > 30;
select "NAME"   from SINGER where AGE>30;

# title: table aliases
SELECT s.name FROM singer AS s WHERE s.age > 30;
SELECT singer.name FROM singer WHERE singer.age > 30;

# title: COUNT(1) is COUNT(*)
SELECT COUNT(1) FROM singer;
SELECT COUNT(*) FROM singer;

# title: COUNT of a primary key is COUNT(*)
SELECT COUNT(singer_id) FROM singer;
SELECT COUNT(*) FROM singer;

# title: COUNT of a NOT NULL column is COUNT(*)
SELECT COUNT(name) FROM singer WHERE country = 'France';
SELECT COUNT(*) FROM singer WHERE country = 'France';

# title: IN-list order and repeats
SELECT name FROM singer WHERE country IN ('France', 'Netherlands');
SELECT name FROM singer WHERE country IN ('Netherlands', 'France', 'France');

# title: a one-value IN is an equality
SELECT name FROM singer WHERE age IN (32);
SELECT name FROM singer WHERE age = 32;

# title: OR of equalities is an IN list
SELECT name FROM singer WHERE age = 32 OR age = 41;
SELECT name FROM singer WHERE age IN (41, 32);

# title: BETWEEN is two comparisons
SELECT name FROM stadium WHERE capacity BETWEEN 4000 AND 11000;
SELECT name FROM stadium WHERE capacity >= 4000 AND capacity <= 11000;

# title: constants go to the right of a comparison
SELECT name FROM singer WHERE 30 < age;
SELECT name FROM singer WHERE age > 30;

# title: NOT of a comparison
SELECT name FROM singer WHERE NOT age <= 30;
SELECT name FROM singer WHERE age > 30;

# title: conjunct order
SELECT name FROM singer WHERE age > 30 AND country = 'France';
SELECT name FROM singer WHERE country = 'France' AND age > 30;

# title: inner join order and ON versus WHERE
SELECT singer.name FROM singer JOIN singer_in_concert ON singer.singer_id = singer_in_concert.singer_id;
SELECT s.name FROM singer_in_concert AS sic, singer AS s WHERE sic.singer_id = s.singer_id;

# title: output aliases and column order
SELECT name AS n, age AS a FROM singer;
SELECT age, name FROM singer;

# title: ORDER BY an alias, a position, or the expression
SELECT name, age AS years FROM singer ORDER BY years DESC;
SELECT name, age FROM singer ORDER BY 2 DESC;

# title: explicit ASC
SELECT name FROM singer ORDER BY age ASC;
SELECT name FROM singer ORDER BY age;

# title: DISTINCT versus GROUP BY without aggregates
SELECT DISTINCT country FROM singer;
SELECT country FROM singer GROUP BY country;

# title: GROUP BY key order
SELECT country, age, COUNT(*) FROM singer GROUP BY country, age;
SELECT country, age, COUNT(*) FROM singer GROUP BY age, country;

# title: DISTINCT and ORDER BY inside an IN subquery
SELECT name FROM stadium WHERE stadium_id IN (SELECT stadium_id FROM concert);
SELECT name FROM stadium WHERE stadium_id IN (SELECT DISTINCT stadium_id FROM concert ORDER BY stadium_id);

# title: the select list of EXISTS
SELECT name FROM stadium WHERE EXISTS (SELECT * FROM concert WHERE concert.stadium_id = stadium.stadium_id);
SELECT name FROM stadium WHERE EXISTS (SELECT 1 FROM concert WHERE concert.stadium_id = stadium.stadium_id);

# title: a number compared with a TEXT column is text
SELECT COUNT(*) FROM concert WHERE year = 2014;
SELECT COUNT(*) FROM concert WHERE year = '2014';

# title: a numeric string compared with an INTEGER column is a number
SELECT name FROM singer WHERE age > '30';
SELECT name FROM singer WHERE age > 30;

# title: SQLite reads a double-quoted word that is no column as a string
SELECT name FROM singer WHERE country = "France";
SELECT name FROM singer WHERE country = 'France';

# title: correlated subquery aliases
SELECT t1.name FROM singer AS t1 WHERE t1.age > (SELECT AVG(t2.age) FROM singer AS t2 WHERE t2.country = t1.country);
SELECT a.name FROM singer AS a WHERE a.age > (SELECT AVG(b.age) FROM singer AS b WHERE b.country = a.country);

# title: SELECT * is its columns
SELECT * FROM stadium;
SELECT stadium_id, name, capacity FROM stadium;

# title: MAX(DISTINCT x) is MAX(x)
SELECT MAX(DISTINCT age) FROM singer;
SELECT MAX(age) FROM singer;
