// Rank entries for a pasted error line or a few typed words, from search.json
// (generator/search.py). Used by the header search and the home page's paste box
// (faildex.js); plain data in, plain data out, so Node can run it too (bench/search.py).
//
// Three signals, strongest first:
//  1. a signature's regex matches a pasted line (defining > supporting > collateral;
//     a longer match is a more specific signature);
//  2. the required literal text of a signature appears in the query (half a line);
//  3. words: each query word (stemmed, without a question's function words, a typo
//     read as the one entry word it is a typo of, a Chinese term as its English words), weighted by how rare it is across
//     entries, found in the entry's name (title, id, systems), its signatures' general
//     messages, what it is seen with and the catalogue's messages mapped to it (less,
//     and the less the more of them a family entry has), or its prose (its whole page);
//     a word few entries use counts in any of them, a word of the same symptom group
//     (hang/stuck/freeze) stands in for a missing one; two words next to each other in a
//     message count again. Equal scores go to the entry whose name the query covers most.
(function (root) {
  "use strict";

  var STRENGTH = { defining: 3, supporting: 2, collateral: 1 };
  var ANSI = /\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|#033\[[0-9;?]*[A-Za-z]/g;   // = faildex/lines.py ANSI (tests/test_site.py)
  var MAX_LINES = 400;      // a pasted log: its last lines hold the error
  var MAX_WORDS = 300;
  var SPECIFIC_DF = 5;      // a word in at most this many entries makes a phrase specific,
                            // and counts at least 1 (1.5 in at most 2) in any field of the entry
  var SEEN = 1.5;           // a word of what an entry is seen with / its catalogue messages...
  var SEEN_SIZE = 200;      // ...at full weight up to this many distinct words, then less
  var SIG = 2;              // a word of the entry's signatures' general messages...
  var SIG_SIZE = 70;        // ...at full weight up to this many distinct words, then less
  var PREFIX_WORDS = 0.3;   // a word only a line's prefix holds (a logger's file, a process tag)

  var UNITS = { bytes: 1, b: 1, kib: 1024, mib: 1048576, gib: 1073741824, tib: 1099511627776,
                kb: 1e3, mb: 1e6, gb: 1e9, tb: 1e12 };

  // "1.50 GiB" -> bytes, "600000" -> 600000, else null (as the engine's reason.quantity)
  function quantity(value) {
    var m = /^\s*(-?[0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*$/.exec(String(value));
    if (!m) return null;
    var unit = m[2].toLowerCase();
    if (unit && !(unit in UNITS)) return null;
    return parseFloat(m[1]) * (unit ? UNITS[unit] : 1);
  }

  // A discriminator's `compare` ("a > 2 * b") over facts; null when a fact is missing.
  function compare(expr, facts) {
    var m = /^(\w+) (<=|>=|<|>) (?:([0-9.]+) \* )?(\w+)$/.exec(expr);
    if (!m || !(m[1] in facts) || !(m[4] in facts)) return null;
    var left = quantity(facts[m[1]]), right = quantity(facts[m[4]]);
    if (left === null || right === null) return null;
    right *= parseFloat(m[3] || "1");
    return { "<": left < right, "<=": left <= right, ">": left > right, ">=": left >= right }[m[2]];
  }

  // A word's stem, so that "hangs", "hanging" and "hang" meet, "killed" meets "kill" and
  // "processes" meets "process", "connection" "connect" (a few English suffixes; words with
  // digits stay whole), and the plurals of short words: "gpus", "jobs", "nics", "keys" (not
  // "this", "bus", "plus").
  function stem(w) {
    if (w.length === 4 && /^[a-z](?:[a-z][^siu]|pu)s$/.test(w)) return w.slice(0, -1);
    if (w.length <= 4 || /[0-9_]/.test(w)) return w;
    if (/(?:ct|pt|ss)ions?$/.test(w)) return w.replace(/ions?$/, "");
    if (/ing$/.test(w) && w.length > 6) return w.slice(0, -3);
    if (/ie[sd]$/.test(w)) return w.slice(0, -3) + "y";
    if (/ed$/.test(w) && w.length > 5) return w.slice(0, -2);
    if (/(?:ches|shes|sses|xes)$/.test(w)) return w.slice(0, -2);
    if (/[^siu]s$/.test(w)) return w.slice(0, -1);
    return w;
  }

  // What a question is made of besides its subject ("why does my job hang at startup"):
  // words that would otherwise score wherever an entry's prose happens to use them.
  var STOP = setOf(("a an and are at be but by can could did do does doesnt dont for from get gets " +
    "getting got has have how i if in into is it its keep keeps me my not of on or our should so " +
    "that the their then there this to was we were what when where which while why will with " +
    "without would you your").split(" "));

  // Chinese words that failure reports use, read as the English words the entries use: a
  // question pasted from a Chinese-language thread otherwise keeps only its ASCII words.
  // Longest first, so that 共享内存 is read before 内存.
  var CJK = [
    ["共享内存", " shared memory shm "], ["显存不足", " gpu out of memory "], ["内存不足", " out of memory host ram "],
    ["显存", " gpu memory "], ["内存", " memory ram "], ["磁盘空间", " disk space "], ["磁盘", " disk "],
    ["无法写", " cannot write "], ["写文件", " write file "], ["文件", " file "], ["空间不足", " no space left "],
    ["卡住", " hang stuck "], ["卡在", " hang stuck "], ["不动", " hang stuck "], ["死锁", " deadlock hang "], ["挂起", " hang "],
    ["超时", " timeout timed out "], ["杀死", " killed "], ["被杀", " killed "], ["段错误", " segmentation fault "],
    ["非法内存访问", " illegal memory access "], ["端口", " port "], ["被占用", " already in use "], ["占用", " in use "],
    ["多卡", " multi gpu distributed "], ["多机", " multi node "], ["单卡", " single gpu "], ["分布式", " distributed "],
    ["显卡", " gpu "], ["驱动", " driver "], ["版本", " version "], ["不匹配", " mismatch "], ["不一致", " mismatch "],
    ["不支持", " not supported "], ["找不到", " not found "], ["不存在", " not found missing "], ["缺少", " missing "],
    ["环境变量", " environment variable "], ["保存", " save checkpoint "], ["加载", " load "], ["下载", " download "],
    ["编译", " compile build "], ["安装", " install "], ["信号", " signal "], ["终止", " terminated "], ["中断", " interrupted "],
    ["梯度", " gradient "], ["损失", " loss "], ["溢出", " overflow "], ["精度", " precision dtype "], ["数据类型", " dtype "],
    ["网络", " network "], ["连接", " connection connect "], ["拒绝", " refused "], ["进程", " process "], ["线程", " thread "],
    ["权重", " weights "], ["模型", " model "], ["训练", " training "], ["推理", " inference "], ["报错", " error "], ["错误", " error "],
  ];
  function fromCJK(text) {
    if (!/[\u3400-\u9fff]/.test(text)) return text;
    CJK.forEach(function (pair) { text = text.split(pair[0]).join(pair[1]); });
    return text;
  }

  // Words that name the same symptom in a reader's words and an entry's: a typed word also
  // counts where the entry has only another word of its group, at RELATED of its weight
  // ("training freezes" finds the hang entries, "killed" the SIGKILL ones, "RAM" memory).
  var RELATED = 0.6;
  var ALIKE = Object.create(null);
  ["hang hung stuck freeze frozen deadlock stall unresponsive", "crash segfault",
   "slow slower slowdown", "oom memory", "ram memory", "resume continue restart",
   "gpu card", "docker container", "kubernetes k8s", "fp16 half", "bf16 bfloat16",
   "nic interface", "kill sigkill", "terminate terminated sigterm"].forEach(function (group) {
    var ws = group.split(" ").map(stem);
    ws.forEach(function (w) {
      ALIKE[w] = (ALIKE[w] || []).concat(ws.filter(function (x) { return x !== w; }));
    });
  });

  // Identifiers count whole and by their parts: a pasted CUBLAS_STATUS_ALLOC_FAILED
  // meets a signature that spells CUBLAS_STATUS_(ALLOC_FAILED|...). partsOf, when given,
  // collects for each part the identifiers it came from.
  function words(text, partsOf) {
    var out = [];
    (fromCJK(text).toLowerCase().replace(/'/g, "").match(/[a-z0-9_]+/g) || []).forEach(function (w) {
      if (STOP[w]) return;
      out.push(stem(w));
      if (w.indexOf("_") >= 0) w.split("_").forEach(function (p) {
        if (p.length <= 2) return;
        out.push(stem(p));
        if (partsOf) (partsOf[stem(p)] = partsOf[stem(p)] || []).push(stem(w));
      });
    });
    return out;
  }

  // Optimal string alignment distance (a transposition counts one), or max + 1 past max.
  function distance(a, b, max) {
    if (Math.abs(a.length - b.length) > max) return max + 1;
    var prev2 = null, prev = [], cur;
    for (var j = 0; j <= b.length; j++) prev.push(j);
    for (var i = 1; i <= a.length; i++) {
      cur = [i];
      var best = i;
      for (j = 1; j <= b.length; j++) {
        var v = Math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
        if (prev2 && i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) v = Math.min(v, prev2[j - 2] + 1);
        cur.push(v);
        if (v < best) best = v;
      }
      if (best > max) return max + 1;
      prev2 = prev;
      prev = cur;
    }
    return prev[b.length];
  }

  function sorted(w) { return w.split("").sort().join(""); }

  function setOf(list) {
    var s = Object.create(null);
    list.forEach(function (w) { s[w] = true; });
    return s;
  }

  function pairs(list) {
    var s = Object.create(null);
    for (var i = 0; i + 1 < list.length; i++) s[list[i] + " " + list[i + 1]] = true;
    return s;
  }

  function prepare(e) {
    var name = words([e.title, e.id.replace(/-/g, " "), e.systems.join(" ")].join(" "));
    var sigText = e.signatures.map(function (s) { return s.text + " " + s.words; }).join(" \n ");
    var own = words(sigText);
    // what the entry says it is seen with, and the catalogue's messages mapped to it: a
    // family entry maps dozens, so their words count less than the signatures' own
    var seen = words((e.seen || "") + " \n " + (e.messages || ""));
    // ... and the longer that text, the less one of its words says: a family entry's
    // thousand words hold "node", "attribute" and "found" by chance (BM25's length norm)
    var seenSet = setOf(seen), seenSize = Object.keys(seenSet).length;
    // the same holds for the signatures' own text: a family entry's 50 messages (a median
    // entry's hold 40 distinct words, a family's up to 500) spell "size", "group" and "must"
    // by chance, and a few typed words then put it above the entry they describe
    var sigSet = setOf(own), sigSize = Object.keys(sigSet).length;
    var sigs = e.signatures.map(function (s) {
      var rx = null;
      if (s.re) {
        try { rx = new RegExp(s.re); } catch (err) { rx = null; }
      }
      return { id: s.id, weight: STRENGTH[s.strength] || 0, rx: rx, literals: s.literals };
    });
    return {
      data: e, sigs: sigs,
      name: setOf(name), sig: sigSet, seen: seenSet, prose: setOf(words(e.prose)),
      seenWeight: SEEN * Math.min(1, Math.sqrt(SEEN_SIZE / Math.max(1, seenSize))),
      sigWeight: SIG * Math.min(1, Math.sqrt(SIG_SIZE / Math.max(1, sigSize))),
      pairs: pairs(own.concat(["\n"], seen, ["\n"], name)),
    };
  }

  function Finder(data) {
    this.entries = data.entries.map(prepare);
    this.byId = Object.create(null);
    var df = Object.create(null);
    this.entries.forEach(function (p) {
      this.byId[p.data.id] = p;
      var all = Object.assign(Object.create(null), p.name, p.sig, p.seen, p.prose);
      Object.keys(all).forEach(function (w) { df[w] = (df[w] || 0) + 1; });
    }, this);
    var n = this.entries.length;
    this.idf = function (w) { return df[w] ? Math.log(1 + n / df[w]) : 0; };
    this.vocabulary = Object.keys(df).filter(function (w) { return w.length >= 4 && !/[0-9_]/.test(w); });
    this.df = df;
    this.corrected = Object.create(null);      // word -> what correct() read it as
    // the engine's own prefixes (search.json, from faildex.lines.PREFIXES), then a level word
    // or a logger's module path, which the engine leaves in the message
    this.prefixes = (data.prefixes || []).map(function (p) {
      try { return new RegExp("^(?:" + p + ")"); } catch (err) { return null; }
    }).filter(Boolean).concat([PREFIX]);
  }

  // A word no entry uses, read as the entry word one typo away (two for long words) when
  // exactly one word is that close: "conection" -> "connection", "timout" -> "timeout"; a
  // four-letter word only when two neighbouring letters are swapped: "laod" -> "load".
  Finder.prototype.correct = function (w) {
    if (this.df[w] || w.length < 4 || /[0-9_]/.test(w)) return w;
    // a pasted log repeats its words, and the box re-ranks at every key: each word is read once
    if (w in this.corrected) return this.corrected[w];
    return (this.corrected[w] = this.nearestWord(w));
  };

  Finder.prototype.nearestWord = function (w) {
    var max = w.length >= 8 ? 2 : 1, best = null, bestD = max + 1, ties = 0;
    for (var i = 0; i < this.vocabulary.length; i++) {
      var v = this.vocabulary[i];
      if (v[0] !== w[0] && v[1] !== w[1]) continue;   // a typo rarely hits both first letters
      if (w.length === 4 && (v.length !== 4 || sorted(v) !== sorted(w))) continue;
      var d = distance(w, v, max);
      if (d < bestD) { best = v; bestD = d; ties = 0; } else if (d === bestD) ties += 1;
    }
    return best && !ties ? best : w;
  };

  // What launchers and loggers put before a message: "[rank3]:", "[default0]:", a
  // timestamp, a level, a logger's module path ("torch.distributed.elastic...api: "; its
  // last part is lower case, so an exception's "etcd.EtcdKeyNotFound: " stays the message).
  // A signature anchored at the start of the message ("^  pod  0/1  ImagePullBackOff")
  // is tried on the line without them too, as the engine does (lines.parse_prefix).
  var PREFIX = /^(?:\[[^\]]{0,40}\]:?|\d{4}-\d\d-\d\d[ T][0-9:.,]+(?:Z|[+-]\d\d:?\d\d)?|(?:ERROR|WARNING|WARN|INFO|DEBUG|CRITICAL|FATAL)\b:?|[A-Za-z_]\w*(?:\.\w+)*\.[a-z_][a-z0-9_]*:(?= ))[ \t]*/;

  function withoutPrefix(line, prefixes) {
    for (var i = 0; i < 8; i++) {
      var m = null;
      for (var k = 0; k < prefixes.length && !(m && m[0]); k++) m = prefixes[k].exec(line);
      if (!m || !m[0]) break;
      line = line.slice(m[0].length).replace(/^[ \t]+/, "");
    }
    return line;
  }

  // The part of a signature's literal that is whole words where the text holds it ("" when
  // it does not): a regex's [Uu]nable to leaves the literal "nable to ", whose "nable" is
  // rare among entries only because it is half a word, and "unable to" says nothing.
  function wholeWords(text, lit) {
    var at = text.indexOf(lit);
    if (at < 0) return "";
    var inner = lit;
    if (/^\w/.test(lit) && at > 0 && /\w/.test(text[at - 1])) inner = inner.replace(/^\w+/, "");
    if (/\w$/.test(lit) && /\w/.test(text[at + lit.length] || "")) inner = inner.replace(/\w+$/, "");
    return inner;
  }

  Finder.prototype.rank = function (query, limit) {
    var text = String(query || "").replace(ANSI, "");
    var lines = text.split(/\r\n|\r|\n/).map(function (l) { return l.trim(); })
      .filter(function (l) { return l; }).slice(-MAX_LINES);
    if (!lines.length) return [];
    var prefixes = this.prefixes;
    var bare = lines.map(function (l) { return withoutPrefix(l, prefixes); });
    // the message's words; a prefix's own words ("EngineCore", "elastic", "multiprocessing"
    // of a logger's path) say where the line was printed, not what failed: they count less
    var partsOf = Object.create(null);
    var qwords = words(bare.join(" \n "), partsOf).slice(-MAX_WORDS).map(this.correct, this);
    var unique = Object.keys(setOf(qwords));
    // a word typed only inside an identifier (num_workers: num, workers) does not count again
    // where the entry holds the identifier itself, which counted already
    var standalone = setOf(words(bare.join(" \n ").replace(/[a-z0-9]*_[a-z0-9_]*/gi, " ")).map(this.correct, this));
    var inMessage = setOf(unique);
    var prefixWords = Object.keys(setOf(words(lines.map(function (l, i) {
      return l.slice(0, l.length - bare[i].length);
    }).join(" \n ")).map(this.correct, this))).filter(function (w) { return !inMessage[w]; });
    var qpairs = Object.keys(pairs(qwords));
    var idf = this.idf, df = this.df;
    var specific = function (lit) {
      return words(lit).some(function (w) { return df[w] && df[w] <= SPECIFIC_DF; });
    };
    var scored = this.entries.map(function (p) {
      var regex = 0, line = -1, literal = 0, wordScore = 0, facts = {};
      p.sigs.forEach(function (s) {
        if (!s.weight) return;
        if (s.rx) {
          for (var i = 0; i < lines.length; i++) {
            var m = s.rx.exec(lines[i]) || (bare[i] !== lines[i] ? s.rx.exec(bare[i]) : null);
            if (m) {
              if (m.groups) Object.keys(m.groups).forEach(function (k) {
                if (m.groups[k] !== undefined) facts[k] = m.groups[k];
              });
              var v = s.weight * 1000 + Math.min(m[0].length, 300);
              if (v > regex) { regex = v; line = i; }
            }
          }
        }
        s.literals.forEach(function (lit) {
          // a phrase, not one word (words are scored below), of 8 characters besides the
          // spaces around them (" error: " is in every log), with a word few entries use
          // ("timed out after", "is available" name nothing)
          if (lit.trim().length >= 8 && /\W/.test(lit) && specific(wholeWords(text, lit)))
            literal = Math.max(literal, s.weight * lit.length);
        });
      });
      var weigh = function (w) {
        var field = p.name[w] ? 3 : p.sig[w] ? p.sigWeight : p.seen[w] ? p.seenWeight : p.prose[w] ? 0.5 : 0;
        return idf(w) * (field && df[w] <= SPECIFIC_DF ? Math.max(field, df[w] <= 2 ? 1.5 : 1) : field);
      };
      unique.forEach(function (w) {
        var v = weigh(w);
        if (!standalone[w] && partsOf[w] && partsOf[w].some(function (x) { return x !== w && weigh(x) > 0; })) return;
        (ALIKE[w] || []).forEach(function (x) { if (!inMessage[x]) v = Math.max(v, RELATED * weigh(x)); });
        wordScore += v;
      });
      prefixWords.forEach(function (w) { wordScore += PREFIX_WORDS * weigh(w); });
      qpairs.forEach(function (pr) {
        if (p.pairs[pr]) wordScore += idf(pr.split(" ")[0]) + idf(pr.split(" ")[1]);
      });
      // on a tie, the entry whose name the query covers most (the more focused page)
      var nameAll = 0, nameHit = 0;
      Object.keys(p.name).forEach(function (w) { nameAll += idf(w); if (inMessage[w]) nameHit += idf(w); });
      return { entry: p.data, regex: regex, line: line, literal: literal, words: wordScore,
               facts: facts, cover: nameAll ? nameHit / nameAll : 0 };
    });
    // A special case beats its general entry on the same line (an FSDP state-dict OOM
    // is also a CUDA OOM) unless a comparison of the line's facts says it is the general
    // one (fragmentation: reserved-but-unallocated > the request; as the engine decides);
    // a downstream report loses to a cause found in the same paste.
    var hit = Object.create(null);
    scored.forEach(function (s) { if (s.regex) hit[s.entry.id] = s; });
    var causeFound = scored.some(function (s) { return s.regex >= 3000 && !s.entry.downstream; });
    scored.forEach(function (s) {
      if (!s.regex) return;
      s.entry.refines.forEach(function (g) {
        if (!hit[g] || hit[g].line !== s.line) return;
        var tests = s.entry.unless.filter(function (u) { return u.entry === g; })
          .map(function (u) { return compare(u.compare, s.facts); });
        s.regex += !tests.length || tests.indexOf(true) >= 0 ? 500 : -500;
      });
      if (s.entry.downstream && causeFound) s.regex -= 2000;
    });
    scored.forEach(function (s) { s.score = s.regex + 10 * s.literal + s.words; });
    // A few words rarely name the special case: when nothing matched as a line, a
    // general entry scoring close to its special case comes first ("CUDA OOM").
    scored.forEach(function (s) {
      if (s.regex) return;
      s.entry.refines.forEach(function (g) {
        var general = scored.find(function (o) { return o.entry.id === g; });
        if (general && !general.regex && general.score >= 0.8 * s.score)
          general.score = Math.max(general.score, s.score + 0.01);
      });
    });
    scored.sort(function (a, b) {
      return b.score - a.score || b.cover - a.cover || (a.entry.id < b.entry.id ? -1 : 1);
    });
    // below a line match, a few shared words are noise: keep hits within reach of the best
    // Past the first three, only what scores near the best: a matched signature (3000+)
    // must not hide the next nearest entries a cut or unusual line still resembles.
    var floor = Math.max(0.5, scored.length ? 0.05 * scored[0].score : 0);
    scored = scored.filter(function (s, i) { return s.score > (i < 3 ? 0.5 : floor); });
    return scored.slice(0, limit || 10).map(function (s) {
      return { id: s.entry.id, title: s.entry.title, url: s.entry.url, summary: s.entry.summary,
               category: s.entry.category, matched: s.regex > 0, score: s.score };
    });
  };

  root.FaildexFinder = Finder;
  if (typeof module !== "undefined" && module.exports) module.exports = Finder;
})(typeof window !== "undefined" ? window : globalThis);
