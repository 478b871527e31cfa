-- The study's own prompt version (agent.prompt_version) on each decision, next to the runtime's
-- prompt_version_id, so the log says which researcher-written instructions the policy worked
-- from. NULL for decisions recorded before it was kept.
ALTER TABLE decision_log ADD COLUMN study_prompt_version TEXT;
