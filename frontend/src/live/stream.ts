// One live socket: sequence numbers checked, a gap (or a reconnect) triggers a REST resync.

import type { Message } from "./types";

type Numbered = Extract<Message, { seq: number }>;

export interface StreamHandlers {
  message(msg: Message): void;
  resync(): Promise<number>; // returns the group's seq the snapshot reflects
  status(text: string): void;
}

export class LiveStream {
  private socket: WebSocket | null = null;
  private seq = 0;
  /** Numbered messages held while a snapshot loads (null: none loading). */
  private held: Numbered[] | null = null;
  private backoff = 500;
  resyncs = 0;

  constructor(private path: string, private handlers: StreamHandlers) {}

  close(): void {
    this.socket?.close();
  }

  open(): void {
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    const socket = new WebSocket(`${scheme}://${location.host}${this.path}`);
    this.socket = socket;
    socket.onopen = () => {
      this.backoff = 500;
      this.handlers.status("live");
    };
    socket.onmessage = (ev: MessageEvent<string>) => this.onMessage(JSON.parse(ev.data) as Message);
    socket.onclose = (ev: CloseEvent) => {
      // 4403: token or membership revoked; 4401: logged out or the session/token expired.
      const ended = ev.code === 4403 ? "access revoked" : ev.code === 4401 ? "signed out: log in again" : null;
      this.handlers.status(ended ?? "reconnecting…");
      if (ev.code === 4403 || ev.code === 4401) return;
      window.setTimeout(() => this.open(), this.backoff + Math.random() * 500);
      this.backoff = Math.min(this.backoff * 2, 15000);
    };
  }

  /**
   * Load the REST snapshot and continue from its seq. Numbered messages that arrive meanwhile are
   * held, then replayed: those the snapshot already reflects are dropped, the newer ones applied
   * on top. If they do not follow the snapshot without a gap (the snapshot is older than a
   * message already here, or a message was lost), load it again, backing off.
   */
  private async sync(first: Numbered[] = []): Promise<void> {
    if (this.held) return;
    this.held = first;
    let wait = 0;
    try {
      for (;;) {
        const seq = await this.handlers.resync();
        this.resyncs += 1;
        const newer = this.held.filter((m) => m.seq > seq).sort((a, b) => a.seq - b.seq);
        if (newer.every((m, i) => m.seq === seq + 1 + i)) {
          this.held = null;
          this.seq = seq;
          for (const m of newer) this.deliver(m);
          return;
        }
        this.held = newer;
        wait = Math.min(wait ? wait * 2 : 100, 4000);
        await new Promise((done) => window.setTimeout(done, wait));
      }
    } catch {
      this.held = null; // the next message finds the gap again and retries
    }
  }

  private onMessage(msg: Message): void {
    if (msg.type === "subscribed") {
      void this.sync();
      return;
    }
    if ("seq" in msg && msg.type !== "change.progress") {
      if (this.held) {
        this.held.push(msg);
        return;
      }
      if (msg.seq <= this.seq) return; // already in the snapshot
      if (msg.seq !== this.seq + 1) {
        void this.sync([msg]); // a gap: something was dropped
        return;
      }
    }
    this.deliver(msg);
  }

  private deliver(msg: Message): void {
    if ("seq" in msg && msg.type !== "change.progress") this.seq = msg.seq;
    this.handlers.message(msg);
  }
}
