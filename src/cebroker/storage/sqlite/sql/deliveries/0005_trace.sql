-- The trace context of each event (its publish span's ``traceparent``, then ``;tracestate`` if
-- any; NULL when not traced), kept with the event so that every delivery attempt joins its
-- trace; a dead letter keeps it too, for the attempts after a redrive.
ALTER TABLE pipeline_events ADD COLUMN trace TEXT;
ALTER TABLE pipeline_deadletters ADD COLUMN trace TEXT;
