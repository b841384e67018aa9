// The prefilter's anchor search in the browser: an Aho-Corasick automaton over bytes,
// one table lookup per byte. Bytes no anchor holds share one class; \n and \r make a
// class that goes back to the root, so a match never spans lines; after a hit the
// automaton sits in a SKIP state until the line ends: one hit per line, which is all
// the engine needs. tests/test_engine.py runs it under node against the CLI's prefilter.
//
// The loop over the bytes is ten lines of WebAssembly (FIND_LOOP below), not
// JavaScript: measured on 52 MB of the nccl-info profile with the 425 scan anchors,
// the same loop ran at ~170 MB/s in V8 when the tables are arguments (bounds checks
// and typed-array loads on every byte), and ~440 MB/s as WebAssembly (node 20).
// (One RegExp alternation of the anchors took ~12 ns/B plus a Latin-1 copy of the
// chunk, and sre in WebAssembly 15-30 ns/B.)
//
// That loop waits on itself: each byte's next state is a load from an address the
// previous load gave (~6 cycles). So a buffer is cut at a line end near its middle and
// both halves go through one loop, two independent states per turn (FIND2_LOOP): the
// CPU runs the two chains side by side. Under node, 450 -> 730 MB/s on 52 MB of the
// nccl-info profile; 375 -> 560 MB/s on the sealed corpus's 162 real logs (92 KB, repeated
// to 64 MB: failure logs, a hit every ~400 bytes).

// words: Uint8Arrays, none holding \n or \r. hitsPerCall bounds the hit buffer (the
// search resumes where a full buffer stopped it); tests make it small.
export function buildAutomaton(words, { hitsPerCall = 1 << 16 } = {}) {
  const byteClass = new Uint8Array(256);   // 0: no anchor holds it; 1: line end
  let width = 2;
  for (const w of words) for (const b of w) if (!byteClass[b]) byteClass[b] = width++;
  byteClass[10] = byteClass[13] = 1;
  // the trie of the words: goto[state][class] -> state (0: none)
  const goto = [new Int32Array(width)], length = [0];
  for (const w of words) {
    let s = 0;
    for (const b of w) {
      const c = byteClass[b];
      if (!goto[s][c]) { goto[s][c] = goto.length; goto.push(new Int32Array(width)); length.push(0); }
      s = goto[s][c];
    }
    length[s] = length[s] ? Math.min(length[s], w.length) : w.length;
  }
  // breadth first: each state's failure link and full transition row (the automaton as
  // a DFA); a state holds a match when an anchor ends there or at its failure state
  const states = goto.length + 1, skipState = states - 1;
  const delta = new Int32Array(states * width), fail = new Int32Array(states), queue = [];
  for (let c = 2; c < width; c++) if (goto[0][c]) { queue.push(goto[0][c]); delta[c] = goto[0][c]; }
  for (let q = 0; q < queue.length; q++) {
    const s = queue[q];
    if (!length[s]) length[s] = length[fail[s]];
    for (let c = 2; c < width; c++) {
      const t = goto[s][c];
      if (t) { fail[t] = delta[fail[s] * width + c]; queue.push(t); delta[s * width + c] = t; }
      else delta[s * width + c] = delta[fail[s] * width + c];
    }
  }
  delta[skipState * width] = skipState;     // class 0 too: only a line end leaves SKIP
  for (let c = 2; c < width; c++) delta[skipState * width + c] = skipState;
  // The tables in WebAssembly memory, as byte addresses: a class is its column's
  // offset in a row; a transition is the next state's row address, negated (minus
  // one) where a match ends there.
  // (classes at 0, then SCRATCH: where the two-lane loop leaves its lanes' state)
  const rowBytes = width * 4, nextAt = SCRATCH + 32, tablesEnd = nextAt + delta.length * 4;
  const memory = new WebAssembly.Memory({ initial: pages(tablesEnd) });
  const classes = new Int32Array(memory.buffer, 0, 256);
  for (let b = 0; b < 256; b++) classes[b] = byteClass[b] * 4;
  const next = new Int32Array(memory.buffer, nextAt, delta.length);
  for (let i = 0; i < delta.length; i++) {
    const t = delta[i], row = nextAt + t * rowBytes;
    next[i] = t !== skipState && length[t] ? -row - 1 : row;
  }
  const found = Int32Array.from(length.slice(0, skipState));
  const { exports } = new WebAssembly.Instance(findModule(), { m: { mem: memory } });
  return { find: exports.find, find2: exports.find2, memory, found, nextAt, rowBytes, tablesEnd,
           hitsPerCall, skip: nextAt + skipState * rowBytes };
}

// The start offset (plus base) of the first anchor on each line of bytes that holds one,
// ascending. bytes must begin at a line start.
export function findHits(a, bytes, base = 0) {
  // bytes after the tables, then room for two lanes of hitsPerCall (end address, state) pairs
  const input = a.tablesEnd, hitsAt = input + ((bytes.length + 7) & ~7);
  const hitsEnd = hitsAt + a.hitsPerCall * 8, hits2End = hitsEnd + a.hitsPerCall * 8;
  if (a.memory.buffer.byteLength < hits2End) a.memory.grow(pages(hits2End) - a.memory.buffer.byteLength / 65536);
  new Uint8Array(a.memory.buffer, input, bytes.length).set(bytes);
  const out = [];
  const collect = (from, to) => {
    const hits = new Int32Array(a.memory.buffer, from, (to - from) / 4);
    for (let k = 0; k < hits.length; k += 2) {
      const end = hits[k] - input, t = (-hits[k + 1] - 1 - a.nextAt) / a.rowBytes;
      out.push(base + end + 1 - a.found[t]);
    }
  };
  // Two lanes, the second from the first line start after the middle (a line end sends
  // the automaton to the root, so no anchor spans the cut). A lane that fills its hit
  // buffer sends the whole buffer to the one-lane search below, which can resume.
  const cut = bytes.length >= TWO_LANES_MIN ? bytes.indexOf(10, bytes.length >> 1) + 1 : 0;
  if (cut > 0 && cut < bytes.length) {
    const mid = input + cut, end = input + bytes.length;
    if (!a.find2(input, mid, mid, end, a.nextAt, a.nextAt, hitsAt, hitsEnd, hitsEnd, hits2End, a.skip, SCRATCH)) {
      const [i, j, s, t, o, o2] = new Int32Array(a.memory.buffer, SCRATCH, 6);
      const stopA = a.find(i, mid, s, o, hitsEnd, 0, a.skip);
      const stopB = a.find(j, end, t, o2, hits2End, 0, a.skip);
      if (stopA < hitsEnd && stopB < hits2End) {
        collect(hitsAt, stopA);
        collect(hitsEnd, stopB);
        return out;
      }
    }
  }
  let from = input, state = a.nextAt;
  for (;;) {
    const stop = a.find(from, input + bytes.length, state, hitsAt, hitsEnd, 0, a.skip);
    collect(hitsAt, stop);
    if (stop < hitsEnd) return out;
    from = new Int32Array(a.memory.buffer, stop - 8, 1)[0] + 1;   // the buffer filled: go on after its last hit
    state = a.skip;
  }
}

const SCRATCH = 1024;          // 6 words: find2's lanes when it returns
const TWO_LANES_MIN = 8192;    // a shorter buffer is searched in one lane

const pages = (bytes) => Math.ceil(bytes / 65536);

// find(i, end, s, out, outEnd, classes, skip) -> the address after the last hit
// written. For each byte at address i < end: s = load(s + load(classes + byte * 4));
// where s < 0 (a match ends at i), store (i, s) at out and go on from SKIP. Returns
// early when out reaches outEnd. As WebAssembly text:
//   block  loop
//     (br_if 1 (i32.ge_u i end))
//     (local.tee s (i32.load (i32.add s (i32.load (i32.add classes (i32.shl (i32.load8_u i) 2))))))
//     (if (i32.lt_s (s) 0) (then (i32.store out i) (i32.store offset=4 out s)
//         (if (i32.ge_u (local.tee out (i32.add out 8)) outEnd) (then (return out)))
//         (local.set s skip)))
//     (local.set i (i32.add i 1)) (br 0)
//   end  end  out
// (s starts as the root's row address.)
const FIND_LOOP = [
  0x02, 0x40, 0x03, 0x40,                                   // block, loop
  0x20, 0, 0x20, 1, 0x4f, 0x0d, 1,                          // br_if 1 (i >= end)
  0x20, 2,                                                  // s
  0x20, 5, 0x20, 0, 0x2d, 0, 0, 0x41, 2, 0x74, 0x6a,        // classes + (load8_u i << 2)
  0x28, 2, 0, 0x6a, 0x28, 2, 0, 0x22, 2,                    // s = load(s + load(...))
  0x20, 2, 0x41, 0, 0x48, 0x04, 0x40,                       // if s < 0
  0x20, 3, 0x20, 0, 0x36, 2, 0,                             //   store out, i
  0x20, 3, 0x20, 2, 0x36, 2, 4,                             //   store out+4, s
  0x20, 3, 0x41, 8, 0x6a, 0x22, 3, 0x20, 4, 0x4f,           //   (out += 8) >= outEnd
  0x04, 0x40, 0x20, 3, 0x0f, 0x0b,                          //   if: return out
  0x20, 6, 0x21, 2,                                         //   s = skip
  0x0b,                                                     // end if
  0x20, 0, 0x41, 1, 0x6a, 0x21, 0, 0x0c, 0,                 // i += 1; br loop
  0x0b, 0x0b, 0x20, 3, 0x0b,                                // end loop, end block, out, end
];

// find2(i, e, j, f, s, t, out, outEnd, out2, out2End, skip, scratch) -> 0, or 1 when a
// lane's hits filled its buffer. FIND_LOOP for two lanes at once, [i, e) with state s
// and hits at out, [j, f) with t and out2; it stops when either lane ends and stores
// i, j, s, t, out, out2 at scratch for find to finish each lane. (classes at 0.)
//   block  loop
//     (br_if 1 (i32.ge_u i e))  (br_if 1 (i32.ge_u j f))
//     (local.set s (i32.load (i32.add s (i32.load (i32.shl (i32.load8_u i) 2)))))
//     (local.set t (i32.load (i32.add t (i32.load (i32.shl (i32.load8_u j) 2)))))
//     (if (i32.lt_s s 0) (then store (i, s) at out; out += 8; (if out >= outEnd: return 1); s = skip))
//     (if (i32.lt_s t 0) (then store (j, t) at out2; out2 += 8; (if out2 >= out2End: return 1); t = skip))
//     i += 1; j += 1; (br 0)
//   end  end  store i, j, s, t, out, out2 at scratch; 0
const lane = (pos, state, out, outEnd, skip) => [
  0x20, state, 0x41, 0, 0x48, 0x04, 0x40,                   // if state < 0
  0x20, out, 0x20, pos, 0x36, 2, 0,                         //   store out, pos
  0x20, out, 0x20, state, 0x36, 2, 4,                       //   store out+4, state
  0x20, out, 0x41, 8, 0x6a, 0x22, out, 0x20, outEnd, 0x4f,  //   (out += 8) >= outEnd
  0x04, 0x40, 0x41, 1, 0x0f, 0x0b,                          //   if: return 1
  0x20, skip, 0x21, state,                                  //   state = skip
  0x0b,                                                     // end if
];
const step = (pos, state) => [
  0x20, state, 0x20, pos, 0x2d, 0, 0, 0x41, 2, 0x74,        // state, load8_u pos << 2
  0x28, 2, 0, 0x6a, 0x28, 2, 0, 0x21, state,                // state = load(state + load(class))
];
const FIND2_LOOP = [
  0x02, 0x40, 0x03, 0x40,                                   // block, loop
  0x20, 0, 0x20, 1, 0x4f, 0x0d, 1,                          // br_if 1 (i >= e)
  0x20, 2, 0x20, 3, 0x4f, 0x0d, 1,                          // br_if 1 (j >= f)
  ...step(0, 4), ...step(2, 5),
  ...lane(0, 4, 6, 7, 10), ...lane(2, 5, 8, 9, 10),
  0x20, 0, 0x41, 1, 0x6a, 0x21, 0,                          // i += 1
  0x20, 2, 0x41, 1, 0x6a, 0x21, 2, 0x0c, 0,                 // j += 1; br loop
  0x0b, 0x0b,                                               // end loop, end block
  ...[0, 2, 4, 5, 6, 8].flatMap((local, k) => [0x20, 11, 0x20, local, 0x36, 2, 4 * k]),   // scratch
  0x41, 0, 0x0b,                                            // 0, end
];

let compiled = null;
function findModule() {
  if (compiled) return compiled;
  const section = (id, bytes) => [id, ...uleb(bytes.length), ...bytes];
  const name = (s) => [s.length, ...Array.from(s, (c) => c.charCodeAt(0))];
  const i32 = 0x7f, body = [0, ...FIND_LOOP], body2 = [0, ...FIND2_LOOP];   // no locals beyond the params
  compiled = new WebAssembly.Module(new Uint8Array([
    0x00, 0x61, 0x73, 0x6d, 1, 0, 0, 0,                     // "\0asm", version 1
    ...section(1, [2, 0x60, 7, ...Array(7).fill(i32), 1, i32,        // type 0: 7 x i32 -> i32
                   0x60, 12, ...Array(12).fill(i32), 1, i32]),       // type 1: 12 x i32 -> i32
    ...section(2, [1, ...name("m"), ...name("mem"), 0x02, 0x00, 1]),   // import memory m.mem
    ...section(3, [2, 0, 1]),                               // two functions, of types 0 and 1
    ...section(7, [2, ...name("find"), 0x00, 0, ...name("find2"), 0x00, 1]),   // their exports
    ...section(10, [2, ...uleb(body.length), ...body, ...uleb(body2.length), ...body2]),   // their code
  ]));
  return compiled;
}

function uleb(n) {
  const out = [];
  do { let b = n & 0x7f; n >>>= 7; if (n) b |= 0x80; out.push(b); } while (n);
  return out;
}
