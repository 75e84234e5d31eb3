-- earshot schema v8: a turn's retrievals carry its turn id (R-OBS).
--
-- Until v7 the search_knowledge tool wrote each retrieval at once and the
-- turn-log trigger claimed every unclaimed row written since the turn
-- started, so two turns running at once (API workers, satellites) could
-- take each other's retrievals. Now the turn keeps its retrievals and
-- writes them, with its own id, in the transaction that inserts its
-- turn-log row (retrieval_json is filled by that insert). The trigger
-- only lifts extra_json's fields into columns and claims nothing.
--
-- Existing rows are unchanged: claimed retrievals keep their turn_id and
-- every turn_log.retrieval_json stays as it was. Rows a v7 build wrote
-- but never had claimed keep turn_id NULL and are no longer claimed.

DROP TRIGGER IF EXISTS turn_log_obs;
CREATE TRIGGER turn_log_obs AFTER INSERT ON turn_log BEGIN
    UPDATE turn_log SET
        memories_json = COALESCE(json_extract(new.extra_json, '$.memories'), '[]'),
        retrieval_json = COALESCE(json_extract(new.extra_json, '$.retrieval'), new.retrieval_json),
        models_json = COALESCE(json_extract(new.extra_json, '$.models'),
            CASE WHEN new.model IS NULL THEN '{}' ELSE json_object('answer', new.model) END)
    WHERE id = new.id;
END;

-- Looked up by turn only now.
DROP INDEX IF EXISTS knowledge_retrievals_unclaimed;
CREATE INDEX knowledge_retrievals_turn ON knowledge_retrievals(turn_id);
