SELECT h.hook_id,
       (SELECT n.at_micros FROM study_notices n
        WHERE n.study_id = h.study_id AND n.position = h.delivered_through + 1)
FROM webhooks h
