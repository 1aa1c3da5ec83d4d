# Non-equivalent pairs: the normalise stage must keep them apart, and the cascade must find a
# counterexample (on schema.sql's data or on a test-suite database).

# title: off by one
SELECT name FROM singer WHERE age > 32;
SELECT name FROM singer WHERE age >= 32;

# title: COUNT of a nullable column
SELECT COUNT(*) FROM singer;
SELECT COUNT(country) FROM singer;

# title: DISTINCT matters
SELECT country FROM singer;
SELECT DISTINCT country FROM singer;

# title: ORDER BY direction
SELECT name FROM singer ORDER BY age;
SELECT name FROM singer ORDER BY age DESC;

# title: a missing ORDER BY
SELECT name FROM singer ORDER BY age;
SELECT name FROM singer;

# title: LEFT versus INNER JOIN
SELECT stadium.name FROM stadium JOIN concert ON concert.stadium_id = stadium.stadium_id;
SELECT stadium.name FROM stadium LEFT JOIN concert ON concert.stadium_id = stadium.stadium_id;

# title: ties under ORDER BY ... LIMIT 1
SELECT name FROM singer ORDER BY age DESC LIMIT 1;
SELECT name FROM singer WHERE age = (SELECT MAX(age) FROM singer);

# title: NOT IN and NULLs
SELECT name FROM stadium WHERE stadium_id NOT IN (SELECT stadium_id FROM concert);
SELECT name FROM stadium WHERE NOT EXISTS (SELECT 1 FROM concert WHERE concert.stadium_id = stadium.stadium_id);

# title: a missing GROUP BY column
SELECT country, age, COUNT(*) FROM singer GROUP BY country, age;
SELECT country, age, COUNT(*) FROM singer GROUP BY country;

# title: text comparison of a TEXT column
SELECT COUNT(*) FROM concert WHERE year = '2014' OR year = '2015';
SELECT COUNT(*) FROM concert WHERE year BETWEEN '2014' AND '2015';

# title: = is case-sensitive, LIKE is not
SELECT name FROM singer WHERE country = 'France';
SELECT name FROM singer WHERE country LIKE 'France';

# title: an extra column
SELECT name FROM singer;
SELECT name, age FROM singer;

# title: MAX over no rows is one NULL row
SELECT MAX(capacity) FROM stadium WHERE capacity > 20000;
SELECT capacity FROM stadium WHERE capacity > 20000 ORDER BY capacity DESC LIMIT 1;

# title: integer division
SELECT AVG(age) FROM singer;
SELECT SUM(age) / COUNT(age) FROM singer;
