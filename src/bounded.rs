//! A least-recently-used map bounded in entries **and in bytes** (issue 30): the caches of
//! folded sessions hold participants' words, and a count alone lets a few very long interviews
//! (each message up to `MAX_MESSAGE_BYTES`, hundreds of turns) fill the memory a thousand short
//! ones would. Each entry comes with an estimate of its size; the least recently used go first
//! until both bounds hold, and an entry larger than the whole byte bound is not kept at all (it
//! is read from the log when next needed, as after any eviction).

use hashlink::LruCache;

pub struct BoundedLru<V> {
    map: LruCache<String, (V, usize)>,
    max_entries: usize,
    max_bytes: usize,
    bytes: usize,
}

impl<V> BoundedLru<V> {
    pub fn new(max_entries: usize, max_bytes: usize) -> Self {
        Self {
            map: LruCache::new_unbounded(),
            max_entries,
            max_bytes,
            bytes: 0,
        }
    }

    /// Keeps `value` (about `bytes` large) as the most recently used, evicting what no longer
    /// fits.
    pub fn insert(&mut self, key: String, value: V, bytes: usize) {
        self.remove(&key);
        if bytes > self.max_bytes {
            return;
        }
        self.bytes += bytes;
        self.map.insert(key, (value, bytes));
        while self.map.len() > self.max_entries || self.bytes > self.max_bytes {
            match self.map.remove_lru() {
                Some((_, (_, size))) => self.bytes -= size,
                None => break,
            }
        }
    }

    pub fn remove(&mut self, key: &str) -> Option<V> {
        let (value, size) = self.map.remove(key)?;
        self.bytes -= size;
        Some(value)
    }

    /// Looked at without counting as a use.
    pub fn peek(&self, key: &str) -> Option<&V> {
        self.map.peek(key).map(|(v, _)| v)
    }

    /// Changed in place, counting as a use; its size estimate stays what it was.
    pub fn get_mut(&mut self, key: &str) -> Option<&mut V> {
        self.map.get_mut(key).map(|(v, _)| v)
    }

    /// The estimated bytes kept.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::BoundedLru;

    #[test]
    fn both_bounds_hold_and_the_least_recently_used_go_first() {
        let mut lru = BoundedLru::new(3, 100);
        lru.insert("a".into(), 1, 40);
        lru.insert("b".into(), 2, 40);
        assert!(lru.get_mut("a").is_some()); // a is now the most recent
        lru.insert("c".into(), 3, 40); // 120 bytes: b goes
        assert_eq!(
            (lru.peek("a"), lru.peek("b"), lru.peek("c")),
            (Some(&1), None, Some(&3))
        );
        assert_eq!(lru.bytes(), 80);
        lru.insert("d".into(), 4, 1);
        lru.insert("e".into(), 5, 1); // four entries: a goes
        assert_eq!(lru.peek("a"), None);
        assert_eq!(lru.bytes(), 42);
        lru.insert("huge".into(), 6, 101); // never kept, and evicts nothing
        assert_eq!((lru.peek("huge"), lru.bytes()), (None, 42));
        lru.insert("c".into(), 7, 10); // replaced, not counted twice
        assert_eq!(lru.bytes(), 12);
        assert_eq!(lru.remove("c"), Some(7));
        assert_eq!(lru.bytes(), 2);
    }
}
