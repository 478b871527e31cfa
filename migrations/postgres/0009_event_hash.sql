-- Event schema version 2: an event's chain hash is stored here, as 32 bytes, instead of as 64 hex
-- characters inside its payload (with the previous event's hash beside it). NULL for version 1
-- events, whose payloads still carry both. See session/src/codec.rs.
ALTER TABLE events ADD COLUMN hash BYTEA;
