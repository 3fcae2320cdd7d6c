// The cases of test_browser.py's projection test, run in a console page by Selenium's
// execute_async_script: projection.js imported as the page imports it, its answers
// handed back through the script's callback.
const done = arguments[arguments.length - 1];
import(new URL("static/projection.js", location.href).href)
  .then(({ Projection }) => {
    const m = (id) => ({ id, content: id });
    const splice = (seq, data) => ({ seq, type: "agent/inbox/spliced", time: 0, data });
    const refused = (baseline, events) => {
      try {
        const p = new Projection(baseline);
        events.forEach((e) => p.apply(e));
        return "applied";
      } catch (e) {
        return `${e.constructor.name}: ${e.message}`;
      }
    };
    const base = { seq: 4, next_turn: [m("a"), m("b")], next_step: [m("c")] };
    const p = new Projection(base);
    const changed = [
      p.apply(splice(3, { target: "next-turn", start: 0, removedCount: 2, inserted: [] })),
      p.apply({ seq: 5, type: "turn/start", time: 0, data: { turn: 1 } }),
      p.apply(splice(6, { target: "next-turn", start: 1, removedCount: 1, inserted: [m("b2"), m("d")] })),
      p.apply(splice(7, { target: "next-step", start: 0, removedCount: 1, inserted: [m("c")] })),
    ];
    // A move (§17.5): its removal (outcome "moved") and its insertion are two splices,
    // applied in order; the message is in neither list between them, and inserted
    // before its removal it would be pending twice.
    const q = new Projection(base);
    const removal = splice(5, { target: "next-turn", start: 0, removedCount: 1, inserted: [], outcome: "moved" });
    const insertion = splice(6, { target: "next-step", start: 1, inserted: [m("a")], post: "p1" });
    const between = (q.apply(removal), [q.lists["next-turn"].map((x) => x.id), q.lists["next-step"].map((x) => x.id), q.where.has("a")]);
    const inserted = q.apply(insertion);
    const back = [
      splice(7, { target: "next-step", start: 1, removedCount: 1, inserted: [], outcome: "moved" }),
      splice(8, { target: "next-turn", start: 1, inserted: [m("a")], post: "p2" }),
    ].map((e) => q.apply(e));
    done({
      moved: {
        between,
        inserted,
        after: [q.lists["next-turn"].map((x) => x.id), q.lists["next-step"].map((x) => x.id), q.where.get("a"), back],
        seq: q.seq,
        early: refused(base, [splice(5, { target: "next-step", start: 1, inserted: [m("a")] })]),
      },
      changed,
      lists: [p.lists["next-turn"].map((x) => x.id), p.lists["next-step"].map((x) => x.id)],
      seq: p.seq,
      gap: refused(base, [splice(6, { target: "next-turn", start: 0, inserted: [m("x")] })]),
      start: refused(base, [splice(5, { target: "next-turn", start: 3, inserted: [m("x")] })]),
      negative: refused(base, [splice(5, { target: "next-step", start: -1, inserted: [] })]),
      past: refused(base, [splice(5, { target: "next-step", start: 0, removedCount: 2, inserted: [] })]),
      unsafe: refused(base, [splice(5, { target: "next-turn", start: 2 ** 53, inserted: [] })]),
      target: refused(base, [splice(5, { target: "later", start: 0, inserted: [] })]),
      duplicate: refused(base, [splice(5, { target: "next-step", start: 1, inserted: [m("a")] })]),
      twice: refused(base, [splice(5, { target: "next-step", start: 0, inserted: [m("x"), m("x")] })]),
      noId: refused(base, [splice(5, { target: "next-step", start: 0, inserted: [{ content: "?" }] })]),
      baseline: refused({ seq: null, next_turn: [m("a")], next_step: [m("a")] }, []),
    });
  })
  .catch((error) => done(`failed: ${error}`));
