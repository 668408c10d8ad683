//! Byte-level BPE on raw bytes: the merge loop of the HF `tokenizers` BPE model (lowest
//! merge rank first, leftmost on ties), without its per-word allocations.
//!
//! Vocabulary keys are the raw bytes a token stands for (the byte-level alphabet undone), so
//! a pre-tokenized piece is looked up as it is. A piece that is one whole token whose own
//! merges rebuild it is answered by one hash lookup; this table is computed at load time by
//! running the merge loop over every vocabulary entry, so the shortcut is exact.

use std::collections::BinaryHeap;

use ahash::AHashMap;

/// Pieces longer than this many bytes merge through a heap instead of a linear scan.
const SCAN_LIMIT: usize = 64;
const NO_MERGE: u32 = u32::MAX;

/// GPT-2's byte-to-character table (`bytes_to_unicode`): printable Latin-1 bytes stand for
/// themselves, the other 68 bytes for U+0100 onwards, in byte order.
pub(crate) fn byte_alphabet() -> [char; 256] {
    let printable = |b: u32| (0x21..=0x7e).contains(&b) || (0xa1..=0xac).contains(&b) || b >= 0xae;
    let mut table = ['\0'; 256];
    let mut next = 256;
    for (b, slot) in table.iter_mut().enumerate() {
        let b = b as u32;
        let code = if printable(b) {
            b
        } else {
            next += 1;
            next - 1
        };
        *slot = char::from_u32(code).unwrap_or('\0');
    }
    table
}

/// The byte alphabet's inverse: character → the byte it stands for.
pub(crate) fn alphabet_bytes() -> AHashMap<char, u8> {
    byte_alphabet()
        .iter()
        .enumerate()
        .map(|(b, c)| (*c, b as u8))
        .collect()
}

/// The bytes a byte-level token string stands for (`inverse` from [`alphabet_bytes`]);
/// `None` when it has a character outside the byte alphabet (such a token can never come
/// out of byte-level pre-tokenization).
pub(crate) fn token_bytes(token: &str, inverse: &AHashMap<char, u8>) -> Option<Vec<u8>> {
    token.chars().map(|c| inverse.get(&c).copied()).collect()
}

/// A byte-level BPE model: vocabulary, merges and the whole-token table.
pub(crate) struct BytePairModel {
    byte_ids: [u32; 256],
    /// `(left id, right id)` packed into a u64 → `(rank, merged id)`.
    merges: AHashMap<u64, (u32, u32)>,
    /// The merges of two single bytes, indexed by `first << 8 | second` (a piece's first
    /// round of lookups, from a table that fits in cache).
    byte_pairs: Vec<(u32, u32)>,
    /// Pieces answered by one token: the tokens whose merges rebuild them (or every
    /// vocabulary token when the model ignores merges for whole words).
    whole: AHashMap<Box<[u8]>, u32>,
}

fn pair(left: u32, right: u32) -> u64 {
    (u64::from(left) << 32) | u64::from(right)
}

impl BytePairModel {
    /// Builds the model from the vocabulary (token string → id) and the ordered merges.
    /// Errors name what is not a plain byte-level BPE.
    pub(crate) fn new(
        vocab: &AHashMap<String, u32>,
        merges: &[(String, String)],
        ignore_merges: bool,
    ) -> Result<Self, String> {
        let alphabet = byte_alphabet();
        let inverse = alphabet_bytes();
        let mut byte_ids = [0u32; 256];
        for (b, c) in alphabet.iter().enumerate() {
            byte_ids[b] = *vocab
                .get(c.to_string().as_str())
                .ok_or_else(|| format!("byte {b:#04x} ({c:?}) has no token"))?;
        }
        let mut merge_map = AHashMap::with_capacity(merges.len());
        let mut joined = String::new();
        for (rank, (a, b)) in merges.iter().enumerate() {
            let id = |t: &str| {
                vocab
                    .get(t)
                    .copied()
                    .ok_or_else(|| format!("merge token {t:?} is not in the vocabulary"))
            };
            joined.clear();
            joined.push_str(a);
            joined.push_str(b);
            let merged = id(&joined)?;
            merge_map.insert(pair(id(a)?, id(b)?), (rank as u32, merged));
        }
        let byte_pairs = (0..=u16::MAX)
            .map(|pair_bytes| {
                let [first, second] = pair_bytes.to_be_bytes();
                merge_map
                    .get(&pair(
                        byte_ids[usize::from(first)],
                        byte_ids[usize::from(second)],
                    ))
                    .copied()
                    .unwrap_or((NO_MERGE, 0))
            })
            .collect();
        let mut model = Self {
            byte_ids,
            byte_pairs,
            merges: merge_map,
            whole: AHashMap::with_capacity(vocab.len()),
        };
        let mut out = Vec::new();
        for (token, &id) in vocab {
            let Some(bytes) = token_bytes(token, &inverse) else {
                continue;
            };
            if !ignore_merges {
                out.clear();
                model.merge(&bytes, &mut out);
                if out[..] != [id] {
                    continue;
                }
            }
            model.whole.insert(bytes.into_boxed_slice(), id);
        }
        Ok(model)
    }

    /// Appends the token ids of one pre-tokenized piece.
    pub(crate) fn encode_piece(&self, piece: &[u8], out: &mut Vec<u32>) {
        if piece.is_empty() {
            return;
        }
        if let Some(&id) = self.whole.get(piece) {
            out.push(id);
            return;
        }
        self.merge(piece, out);
    }

    fn rank(&self, left: u32, right: u32) -> (u32, u32) {
        self.merges
            .get(&pair(left, right))
            .copied()
            .unwrap_or((NO_MERGE, 0))
    }

    fn merge(&self, piece: &[u8], out: &mut Vec<u32>) {
        if piece.is_empty() {
            return;
        }
        if piece.len() > SCAN_LIMIT {
            self.merge_heap(piece, out);
        } else {
            self.merge_scan(piece, out);
        }
    }

    /// Short pieces: symbols and the rank of each adjacent pair in arrays on the stack;
    /// each step merges the lowest rank (the leftmost on ties) and re-ranks its neighbours.
    fn merge_scan(&self, piece: &[u8], out: &mut Vec<u32>) {
        let mut ids = [0u32; SCAN_LIMIT];
        let mut ranks = [(NO_MERGE, 0u32); SCAN_LIMIT];
        let mut len = piece.len();
        for (slot, &b) in ids.iter_mut().zip(piece) {
            *slot = self.byte_ids[usize::from(b)];
        }
        for (slot, bytes) in ranks.iter_mut().zip(piece.windows(2)) {
            *slot = self.byte_pairs[usize::from(u16::from_be_bytes([bytes[0], bytes[1]]))];
        }
        loop {
            let mut best = usize::MAX;
            let mut best_rank = NO_MERGE;
            for (i, &(rank, _)) in ranks[..len - 1].iter().enumerate() {
                if rank < best_rank {
                    best_rank = rank;
                    best = i;
                }
            }
            if best == usize::MAX {
                break;
            }
            let i = best;
            ids[i] = ranks[i].1;
            ids.copy_within(i + 2..len, i + 1);
            ranks.copy_within(i + 1..len - 1, i);
            len -= 1;
            if i > 0 {
                ranks[i - 1] = self.rank(ids[i - 1], ids[i]);
            }
            if i + 1 < len {
                ranks[i] = self.rank(ids[i], ids[i + 1]);
            }
        }
        out.extend_from_slice(&ids[..len]);
    }

    /// Long pieces: HF's algorithm, a min-heap of (rank, position) over a linked list of
    /// symbols; stale entries are skipped when their pair no longer merges to the same id.
    fn merge_heap(&self, piece: &[u8], out: &mut Vec<u32>) {
        #[derive(PartialEq, Eq, PartialOrd, Ord)]
        struct Entry(std::cmp::Reverse<(u32, usize)>, u32);
        let n = piece.len();
        let mut ids: Vec<u32> = piece
            .iter()
            .map(|&b| self.byte_ids[usize::from(b)])
            .collect();
        let mut next: Vec<usize> = (1..=n).collect();
        let mut prev: Vec<usize> = (0..n).map(|i| i.wrapping_sub(1)).collect();
        let mut alive = vec![true; n];
        let mut heap = BinaryHeap::with_capacity(n);
        let push = |heap: &mut BinaryHeap<Entry>, pos: usize, l: u32, r: u32| {
            let (rank, merged) = self.rank(l, r);
            if rank != NO_MERGE {
                heap.push(Entry(std::cmp::Reverse((rank, pos)), merged));
            }
        };
        for i in 0..n.saturating_sub(1) {
            push(&mut heap, i, ids[i], ids[i + 1]);
        }
        while let Some(Entry(std::cmp::Reverse((_, pos)), merged)) = heap.pop() {
            if !alive[pos] || next[pos] >= n {
                continue;
            }
            let right = next[pos];
            let (rank, current) = self.rank(ids[pos], ids[right]);
            if rank == NO_MERGE || current != merged {
                continue;
            }
            ids[pos] = merged;
            alive[right] = false;
            next[pos] = next[right];
            if next[pos] < n {
                prev[next[pos]] = pos;
            }
            if prev[pos] < n {
                push(&mut heap, prev[pos], ids[prev[pos]], ids[pos]);
            }
            if next[pos] < n {
                push(&mut heap, pos, ids[pos], ids[next[pos]]);
            }
        }
        let mut i = 0;
        while i < n {
            out.push(ids[i]);
            i = next[i];
        }
    }
}
