// The §5.2 queue projection: a baseline {seq, next_turn, next_step} plus every later
// event in order, applying `agent/inbox/spliced` records with §3.4's checks. Any gap in
// seq or failed check throws; the page then fetches a new baseline.

export const TARGETS = ["next-turn", "next-step"];

/** A projection that can no longer follow the log (a gap or an invalid record). */
export class ProjectionError extends Error {}

export class Projection {
  /** From a baseline as the API gives it (`seq` null: before any event). */
  constructor(baseline) {
    this.seq = baseline.seq ?? -1;
    this.lists = { "next-turn": [], "next-step": [] };
    this.where = new Map();
    for (const [target, key] of [["next-turn", "next_turn"], ["next-step", "next_step"]]) {
      for (const message of baseline[key]) {
        checkMessage(message);
        if (this.where.has(message.id)) throw new ProjectionError(`message "${message.id}" is already pending`);
        this.where.set(message.id, target);
        this.lists[target].push(message);
      }
    }
  }

  /**
   * Applies the event that follows the projection's seq; an older one is skipped
   * (false), a later one is a gap (throws). True when the queues changed.
   */
  apply(event) {
    if (event.seq <= this.seq) return false;
    if (event.seq !== this.seq + 1) throw new ProjectionError(`gap: seq ${event.seq} after ${this.seq}`);
    if (event.type !== "agent/inbox/spliced") {
      this.seq = event.seq;
      return false;
    }
    this.splice(event.data, event.seq);
    this.seq = event.seq;
    return true;
  }

  splice(record, seq) {
    const invalid = (why) => new ProjectionError(`invalid inbox splice at seq ${seq}: ${why}`);
    if (record === null || typeof record !== "object") throw invalid("not an object");
    const list = this.lists[record.target];
    if (!list) throw invalid(`unknown target ${JSON.stringify(record.target)}`);
    const start = record.start;
    const removed = record.removedCount ?? 0;
    if (!Number.isSafeInteger(start) || !Number.isSafeInteger(removed)) throw invalid("coordinates are not safe integers");
    if (start < 0 || start > list.length) throw invalid(`start ${start} outside 0..${list.length}`);
    if (removed < 0 || start + removed > list.length) throw invalid(`removedCount ${removed} past the list`);
    const inserted = record.inserted ?? [];
    if (!Array.isArray(inserted)) throw invalid("inserted is not a list");
    const freed = new Set(list.slice(start, start + removed).map((m) => m.id));
    const seen = new Set();
    for (const message of inserted) {
      checkMessage(message);
      if (seen.has(message.id) || (this.where.has(message.id) && !freed.has(message.id))) {
        throw new ProjectionError(`message "${message.id}" is already pending`);
      }
      seen.add(message.id);
    }
    for (const id of freed) this.where.delete(id);
    list.splice(start, removed, ...inserted);
    for (const message of inserted) this.where.set(message.id, record.target);
  }
}

function checkMessage(message) {
  if (message === null || typeof message !== "object" || typeof message.id !== "string" || message.id === "") {
    throw new ProjectionError("a message without a non-empty string id");
  }
}
