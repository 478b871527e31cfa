UPDATE studies
SET status = $2, public_slug = $3, published = $4, published_at = $5, updated_at = $5
WHERE study_id = $1
