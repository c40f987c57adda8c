#!/bin/bash
set -e
sqlite3 /app/shop.db '.tables' '.schema'

sqlite3 /app/shop.db "SELECT quote(status), count(*) FROM orders GROUP BY status;"

sqlite3 /app/shop.db "UPDATE orders SET status = lower(trim(status)) WHERE status <> lower(trim(status));"

sqlite3 /app/shop.db "DROP VIEW IF EXISTS customer_revenue; CREATE VIEW customer_revenue AS SELECT c.id AS customer_id, c.name AS name, round(coalesce((SELECT sum(oi.qty * oi.unit_price) FROM orders o JOIN order_items oi ON oi.order_id = o.id WHERE o.customer_id = c.id AND o.status = 'paid'), 0), 2) AS revenue FROM customers c;"

sqlite3 /app/shop.db "CREATE INDEX IF NOT EXISTS idx_orders_customer ON orders(customer_id);"

sqlite3 /app/shop.db "SELECT * FROM customer_revenue ORDER BY revenue DESC LIMIT 5; SELECT count(*) FROM customer_revenue;"

mkdir -p /app/reports && sqlite3 -header -csv /app/shop.db "SELECT p.category AS category, count(DISTINCT o.id) AS orders, printf('%.2f', sum(oi.qty * oi.unit_price)) AS revenue FROM orders o JOIN order_items oi ON oi.order_id = o.id JOIN products p ON p.id = oi.product_id WHERE o.status = 'paid' AND o.order_date >= '2023-01-01' AND o.order_date < '2024-01-01' GROUP BY p.category ORDER BY sum(oi.qty * oi.unit_price) DESC;" > /app/reports/categories_2023.csv

cat /app/reports/categories_2023.csv
