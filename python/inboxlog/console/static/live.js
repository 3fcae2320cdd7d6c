// The page's one live stream (an EventSource). The browser reconnects by itself with
// Last-Event-ID; when it gives up (the server answered an error while restarting), this
// opens a new stream from the next seq. Closed on pagehide, reopened if the page comes
// back from the back/forward cache.

export class Live {
  /**
   * `url(since)`: the stream's URL; `onEvent(data, id)`: each message; `onState(state)`:
   * "live", "reconnecting" or "closed"; `onOpen()`: after each (re)connection.
   */
  constructor({ url, onEvent, onState, onOpen }) {
    this.url = url;
    this.onEvent = onEvent;
    this.onState = onState ?? (() => {});
    this.onOpen = onOpen ?? (() => {});
    this.source = null;
    this.timer = null;
    this.since = null;
    addEventListener("pagehide", () => this.close());
    addEventListener("pageshow", (event) => {
      if (event.persisted && this.since !== null) this.open(this.since);
    });
  }

  /** (Re)opens the stream from `since` (a seq, or null for a stream without one). */
  open(since) {
    this.close();
    this.since = since;
    const source = new EventSource(this.url(since));
    this.source = source;
    source.onopen = () => {
      this.onState("live");
      this.onOpen();
    };
    source.onmessage = (message) => {
      if (this.source !== source) return;
      if (message.lastEventId !== "" && this.since !== null) this.since = Number(message.lastEventId) + 1;
      this.onEvent(JSON.parse(message.data), message.lastEventId);
    };
    source.onerror = () => {
      if (this.source !== source) return;
      if (source.readyState === EventSource.CLOSED) {
        this.onState("reconnecting");
        source.close();
        this.source = null;
        this.timer = setTimeout(() => this.open(this.since), 1000);
      } else {
        this.onState("reconnecting");
      }
    };
  }

  close() {
    clearTimeout(this.timer);
    this.timer = null;
    if (this.source) {
      this.source.close();
      this.source = null;
      this.onState("closed");
    }
  }
}
