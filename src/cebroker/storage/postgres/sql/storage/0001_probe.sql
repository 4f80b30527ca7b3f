-- The recovery probe's row: one small durable write that tells the storage is back.
CREATE TABLE storage_probe (id int PRIMARY KEY CHECK (id = 1), at double precision NOT NULL);
