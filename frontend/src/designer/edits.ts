// Editing a revision's graph JSON in the browser: every change is an Edit that can be applied
// and reverted exactly, so undo/redo is a walk over two stacks. The rules mirror
// designer.graph.FabricGraph (free ports only, names IB node descriptions accept); the server
// re-validates everything on every change anyway.

import type { Catalogue, GraphDoc, LinkRow, SwitchModel, SwitchRow } from "./types";

export type Edit =
  | { kind: "add-switch"; row: SwitchRow }
  | { kind: "remove-switch"; row: SwitchRow; index: number; links: [number, LinkRow][] }
  | { kind: "connect"; link: LinkRow }
  | { kind: "disconnect"; index: number; link: LinkRow }
  | { kind: "set-cable"; index: number; before: string; after: string };

export class EditError extends Error {}

const FORBIDDEN = /["#@;:\s]/;
const TIER_ORDER: Record<string, number> = { node: 0, leaf: 1, spine: 2, core: 3 };

export function describe(edit: Edit): string {
  switch (edit.kind) {
    case "add-switch":
      return `add ${edit.row.name} (${edit.row.model}, ${edit.row.tier})`;
    case "remove-switch":
      return `remove ${edit.row.name} and ${edit.links.length} cables`;
    case "connect":
      return `connect ${edit.link[0]}[${edit.link[1]}] – ${edit.link[2]}[${edit.link[3]}]`;
    case "disconnect":
      return `disconnect ${edit.link[0]}[${edit.link[1]}] – ${edit.link[2]}[${edit.link[3]}]`;
    case "set-cable":
      return `cable ${edit.before || "none"} → ${edit.after}`;
  }
}

export class GraphEditor {
  private done: Edit[] = [];
  private undone: Edit[] = [];
  private portIndex: Map<string, number> | null = null;
  private switchIndex: Map<string, SwitchRow> | null = null;
  private nodePorts: Map<string, number> | null = null;

  constructor(
    public graph: GraphDoc,
    private catalogue: Catalogue,
    private onChange: (edit: Edit | null) => void = () => undefined,
  ) {}

  get canUndo(): boolean {
    return this.done.length > 0;
  }
  get canRedo(): boolean {
    return this.undone.length > 0;
  }
  get editCount(): number {
    return this.done.length;
  }
  get history(): readonly Edit[] {
    return this.done;
  }

  // ---- lookups --------------------------------------------------------------------------
  private touch(): void {
    this.portIndex = null;
    this.switchIndex = null;
  }

  switchRow(name: string): SwitchRow | undefined {
    if (!this.switchIndex) this.switchIndex = new Map(this.graph.switches.map((s) => [s.name, s]));
    return this.switchIndex.get(name);
  }

  isSwitch(name: string): boolean {
    return this.switchRow(name) !== undefined;
  }

  hasDevice(name: string): boolean {
    if (!this.nodePorts) this.nodePorts = new Map(this.graph.nodes.map((n) => [n.name, n.port_guids.length]));
    return this.isSwitch(name) || this.nodePorts.has(name);
  }

  model(name: string): SwitchModel | undefined {
    return (
      this.graph.catalogue.switches.find((m) => m.name === name) ??
      this.catalogue.switches.find((m) => m.name === name)
    );
  }

  portCount(device: string): number {
    const sw = this.switchRow(device);
    if (sw) {
      const model = this.model(sw.model);
      if (!model) return 0;
      return sw.split && model.split_modes[sw.split] ? model.split_modes[sw.split][0] : model.ports;
    }
    this.hasDevice(device);
    return this.nodePorts!.get(device) ?? 0;
  }

  linkIndexAt(device: string, port: number): number {
    if (!this.portIndex) {
      this.portIndex = new Map();
      this.graph.links.forEach((lk, i) => {
        this.portIndex!.set(`${lk[0]}\u0000${lk[1]}`, i);
        this.portIndex!.set(`${lk[2]}\u0000${lk[3]}`, i);
      });
    }
    return this.portIndex.get(`${device}\u0000${port}`) ?? -1;
  }

  freePorts(device: string): number[] {
    const out: number[] = [];
    const count = this.portCount(device);
    for (let p = 1; p <= count; p++) if (this.linkIndexAt(device, p) < 0) out.push(p);
    return out;
  }

  deviceNames(): string[] {
    return [...this.graph.switches.map((s) => s.name), ...this.graph.nodes.map((n) => n.name)];
  }

  linkTier(a: string, b: string): string {
    let ta = this.switchRow(a)?.tier ?? "node";
    let tb = this.switchRow(b)?.tier ?? "node";
    if ((TIER_ORDER[ta] ?? 9) > (TIER_ORDER[tb] ?? 9)) [ta, tb] = [tb, ta];
    if (ta === "spine" && tb === "spine" && this.graph.topology === "dragonfly-plus") return "global";
    if (ta === tb) return ta;
    if (ta === "node" && tb !== "leaf") return tb === "torus" ? "node_switch" : `node_${tb}`;
    return `${ta}_${tb}`;
  }

  private nextGuid(): string {
    let max = 0x0002c90200000000n;
    for (const sw of this.graph.switches) {
      const g = BigInt(sw.guid);
      if (g > max) max = g;
    }
    return `0x${(max + 1n).toString(16).padStart(16, "0")}`;
  }

  // ---- edits ----------------------------------------------------------------------------
  addSwitch(name: string, model: string, tier: string): Edit {
    name = name.trim();
    if (!name || name.length > 40 || FORBIDDEN.test(name))
      throw new EditError(`device name ${JSON.stringify(name)} is empty, too long or has spaces or "#@;:": use letters, digits, '-', '_' or '.'`);
    if (this.hasDevice(name)) throw new EditError(`${name} already exists: choose another name`);
    if (!this.model(model)) throw new EditError(`unknown switch model ${model}`);
    const row: SwitchRow = {
      name, model, tier, guid: this.nextGuid(), rack: "", u: 0, su: -1, pod: -1,
      index: this.graph.switches.filter((s) => s.tier === tier).length, split: null, coords: [],
    };
    return this.push({ kind: "add-switch", row });
  }

  removeSwitch(name: string): Edit {
    const index = this.graph.switches.findIndex((s) => s.name === name);
    if (index < 0) throw new EditError(`${name} is not a switch of this design`);
    const links: [number, LinkRow][] = [];
    this.graph.links.forEach((lk, i) => {
      if (lk[0] === name || lk[2] === name) links.push([i, lk]);
    });
    return this.push({ kind: "remove-switch", row: this.graph.switches[index], index, links });
  }

  connect(a: string, aPort: number, b: string, bPort: number, cable = ""): Edit {
    for (const [dev, port] of [[a, aPort], [b, bPort]] as [string, number][]) {
      if (!this.hasDevice(dev)) throw new EditError(`${dev || "(empty)"} does not exist`);
      const count = this.portCount(dev);
      if (!Number.isInteger(port) || port < 1 || port > count)
        throw new EditError(`${dev} has no port ${port}: ports are 1..${count}`);
      const busy = this.linkIndexAt(dev, port);
      if (busy >= 0) {
        const lk = this.graph.links[busy];
        const other = lk[0] === dev && lk[1] === port ? lk[2] : lk[0];
        const free = this.freePorts(dev);
        throw new EditError(`${dev}[${port}] is already cabled to ${other}: free ports are ${free.length ? compress(free) : "none"}`);
      }
    }
    if (a === b && aPort === bPort) throw new EditError(`${a}[${aPort}] cannot be cabled to itself`);
    if (cable && !this.catalogue.cables.some((c) => c.name === cable))
      throw new EditError(`unknown cable type ${cable}`);
    // Without a choice, copy the cable and length of a neighbouring link of the same tier.
    const tier = this.linkTier(a, b);
    const similar = this.graph.links.find((lk) => lk[4] === tier && (lk[0] === a || lk[2] === a || lk[0] === b || lk[2] === b))
      ?? this.graph.links.find((lk) => lk[4] === tier);
    const length = similar ? similar[6] : 3;
    const chosen = cable || (similar ? similar[5] : "");
    const [lo, hi] = (TIER_ORDER[this.switchRow(a)?.tier ?? "node"] ?? 9) <= (TIER_ORDER[this.switchRow(b)?.tier ?? "node"] ?? 9)
      ? [[a, aPort], [b, bPort]] as const
      : [[b, bPort], [a, aPort]] as const;
    return this.push({ kind: "connect", link: [lo[0], lo[1], hi[0], hi[1], tier, chosen, length] });
  }

  disconnect(device: string, port: number): Edit {
    const index = this.linkIndexAt(device, port);
    if (index < 0) throw new EditError(`${device}[${port}] has no cable`);
    return this.push({ kind: "disconnect", index, link: this.graph.links[index] });
  }

  setCable(device: string, port: number, cable: string): Edit {
    const index = this.linkIndexAt(device, port);
    if (index < 0) throw new EditError(`${device}[${port}] has no cable`);
    if (!this.catalogue.cables.some((c) => c.name === cable)) throw new EditError(`unknown cable type ${cable}`);
    const before = this.graph.links[index][5];
    if (before === cable) throw new EditError(`${device}[${port}] already uses ${cable}`);
    return this.push({ kind: "set-cable", index, before, after: cable });
  }

  undo(): Edit | null {
    const edit = this.done.pop();
    if (!edit) return null;
    this.revert(edit);
    this.undone.push(edit);
    this.onChange(edit);
    return edit;
  }

  redo(): Edit | null {
    const edit = this.undone.pop();
    if (!edit) return null;
    this.apply(edit);
    this.done.push(edit);
    this.onChange(edit);
    return edit;
  }

  private push(edit: Edit): Edit {
    this.apply(edit);
    this.done.push(edit);
    this.undone = [];
    this.onChange(edit);
    return edit;
  }

  private apply(edit: Edit): void {
    const g = this.graph;
    switch (edit.kind) {
      case "add-switch":
        g.switches.push(edit.row);
        break;
      case "remove-switch": {
        g.switches.splice(edit.index, 1);
        const drop = new Set(edit.links.map(([i]) => i));
        g.links = g.links.filter((_, i) => !drop.has(i));
        break;
      }
      case "connect":
        g.links.push(edit.link);
        break;
      case "disconnect":
        g.links.splice(edit.index, 1);
        break;
      case "set-cable":
        g.links[edit.index][5] = edit.after; // in place: other edits hold this same row
        break;
    }
    this.touch();
  }

  private revert(edit: Edit): void {
    const g = this.graph;
    switch (edit.kind) {
      case "add-switch":
        g.switches = g.switches.filter((s) => s !== edit.row);
        break;
      case "remove-switch":
        g.switches.splice(edit.index, 0, edit.row);
        for (const [i, lk] of edit.links) g.links.splice(i, 0, lk); // ascending: indices line up
        break;
      case "connect":
        g.links = g.links.filter((lk) => lk !== edit.link);
        break;
      case "disconnect":
        g.links.splice(edit.index, 0, edit.link);
        break;
      case "set-cable":
        g.links[edit.index][5] = edit.before;
        break;
    }
    this.touch();
  }
}

export function compress(values: number[]): string {
  const out: string[] = [];
  for (let i = 0; i < values.length; ) {
    let j = i;
    while (j + 1 < values.length && values[j + 1] === values[j] + 1) j++;
    out.push(i === j ? `${values[i]}` : `${values[i]}-${values[j]}`);
    i = j + 1;
  }
  return out.join(",");
}
