"""A drive image as a PTS target: ``ssdtwin fio`` in process, in simulated time.

Target spec: the image directory (``./cm6``), optionally with ``:nsN`` for another
namespace (``./cm6:ns2``); the default is namespace 1. Purge is an NVMe Format with
Secure Erase Settings 1 (the FTL is reset: every LBA unmapped, blocks erased, wear kept),
idle time is simulated with background GC (``Drive.idle``). The image is committed when
the target is closed, also after Ctrl-C: every state the harness leaves is a consistent
drive (what the fio runs did up to the interruption).
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional

from .. import _core
from ..drive import Drive, spec_digest
from .records import FioJson, SpecDoc
from .target import DeviceInfo, PtsError

if TYPE_CHECKING:
    from ..fio.contract import ConvergeOut, ConvergeRule

# auto and nvme-format: Format NVM with SES=1 (a secure erase); trim: deallocate the whole
# namespace (the documented fallback on real devices); none: no purge (not PTS-conformant).
PURGE_METHODS = ("auto", "nvme-format", "trim", "none")
_NS_SUFFIX = re.compile(r"^(?P<path>.+?):ns(?P<ns>[0-9]+)$")


MAX_NSID = 0xFFFF_FFFE


def split_spec(spec: str) -> tuple[Path, Optional[int]]:
    """``./cm6:ns2`` → (./cm6, 2); ``./cm6`` → (./cm6, None)."""
    m = _NS_SUFFIX.match(spec)
    if m and not Path(spec).exists():
        return Path(m.group("path")), int(m.group("ns"))
    return Path(spec), None


def is_image(path: Path) -> bool:
    """Whether ``path`` looks like a drive image directory (``ssdtwin create`` writes ssdtwin.toml)."""
    return (path / "ssdtwin.toml").is_file()


# What `create` sets apart from the spec's text: the scale (capacity and blocks per plane, whose
# sources then start "<full-scale value> (full scale)"), --nvm-sets and --partitions.
_SCALED = ("capacity.tnvmcap_bytes", "nand.blocks_per_plane")
_SET_BY_CREATE = ("scale", "nvm_sets.sets", "ftl.partitions")


def _changed(a: Any, b: Any, path: str, out: list[str]) -> None:
    """The dotted paths where spec ``a`` has another value than ``b`` (sources not compared;
    the scaled fields at their full-scale value count as equal)."""
    if isinstance(a, dict) and isinstance(b, dict):
        if "value" in a and "source" in a:
            if a["value"] != b.get("value") and not (path in _SCALED and str(a["source"]).startswith(f"{b.get('value')} (full scale)")):
                out.append(path)
            return
        for k in sorted(set(a) | set(b)):
            _changed(a.get(k), b.get(k), f"{path}.{k}" if path else k, out)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            _changed(x, y, f"{path}[{i}]", out)
    elif a != b:
        out.append(path)


def spec_differs(spec: dict[str, Any], name: str) -> Optional[list[str]]:
    """The dotted paths where a twin's spec differs from preset ``name`` (what ``create``
    sets apart: none); None when no preset has that name."""
    try:
        preset = _core.preset(name)
    except _core.SsdtwinError:
        return None
    out: list[str] = []
    _changed(spec, preset, "", out)
    return [p for p in out if p not in _SET_BY_CREATE]


def spec_origin(spec: dict[str, Any], name: str) -> str:
    """The report's word for the drive a twin models: ``preset NAME`` when its spec is the
    preset's, ``spec differing from preset NAME (ftl.write_buffer_bytes, ...)`` when it is not:
    made with ``create --spec`` from an edited copy (the image keeps the preset's name, and a
    report calling it the preset misled whoever compared it with the preset's), or made by an
    ssdtwin whose preset had other values; ``spec NAME (not a preset)`` for a name no preset
    has."""
    out = spec_differs(spec, name)
    if out is None:
        return f"spec {name} (not a preset)"
    if not out:
        return f"preset {name}"
    shown = ", ".join(out[:6]) + (f" and {len(out) - 6} more" if len(out) > 6 else "")
    return f"spec differing from preset {name} ({shown})"


_FULL_SCALE = re.compile(r"^(\d+) \(full scale\)")


def full_scale_spec(spec: dict[str, Any]) -> dict[str, Any]:
    """A twin's spec as the file it was made from held it: the scaled fields at their full-scale
    values (their sources start "<value> (full scale)") and no scale, so its digest
    (drive.spec_digest) is the one of that file or preset at any ``--scale``."""
    out: dict[str, Any] = json.loads(json.dumps(spec))
    out["scale"] = 1
    for path in _SCALED:
        section, key = path.split(".")
        field = (out.get(section) or {}).get(key)
        m = _FULL_SCALE.match(str(field.get("source", ""))) if isinstance(field, dict) else None
        if m and isinstance(field, dict):
            field["value"] = int(m.group(1))
    return out


def spec_doc(spec: dict[str, Any], name: str) -> SpecDoc:
    """pts.json ``device.spec``: what the twin is: ``origin`` "preset" when its values are
    preset ``name``'s, else "spec file" (``create --spec``: an edited copy, a spec that
    ``calibrate --out`` wrote, or a preset of another ssdtwin), its name and the digest of its
    values at full scale (sweep's image cache names a preset by the same digest)."""
    differs = spec_differs(spec, name)
    return {"origin": "preset" if differs == [] else "spec file", "name": name, "digest": spec_digest(full_scale_spec(spec))}


class TwinTarget:
    """A twin image opened in process; one namespace is the device under test. Writable by
    default (the run changes the image and is committed); ``writable=False`` runs on an
    in-memory copy and leaves the image as it was (``run(..., jobs=N)``: one per test)."""

    def __init__(
        self, spec: str, namespace: Optional[int] = None, seed: int = 0, purge: str = "auto", writable: bool = True, converge: bool = True
    ) -> None:
        if purge not in PURGE_METHODS:
            raise PtsError(f"--purge {purge}: a twin purges with one of {', '.join(PURGE_METHODS)}")
        self.purge_method = purge
        path, ns_from_spec = split_spec(spec)
        # NVMe NSIDs run from 1 to FFFFFFFEh (0 is none, FFFFFFFFh every namespace): ns0 ran
        # on namespace 1, and a number past 32 bits was a traceback.
        if ns_from_spec is not None and not 1 <= ns_from_spec <= MAX_NSID:
            raise PtsError(f"{spec}: namespace {ns_from_spec}: an NSID from 1 to {MAX_NSID}")
        if namespace is not None and not 1 <= namespace <= MAX_NSID:
            raise PtsError(f"--namespace {namespace}: an NSID from 1 to {MAX_NSID}")
        if namespace is not None and ns_from_spec is not None and namespace != ns_from_spec:
            raise PtsError(f"{spec}: names namespace {ns_from_spec} but --namespace is {namespace}")
        self.namespace = namespace or ns_from_spec or 1
        if not path.is_dir():
            raise PtsError(f"{path}: no such drive image directory (create one with `ssdtwin create`)")
        self.writable = writable
        # Time each round only until its figures converge, the rest in fast-forward
        # (docs/pts.md, "Converging rounds"); off: every round timed in full.
        self.converge = converge
        try:
            self.drive = Drive.open(path, writable=writable)
        except _core.SsdtwinError as e:
            raise PtsError(f"{path}: cannot open the drive image: {e}") from None
        self.path = path
        self.seed = seed
        self.runs = 0  # fio runs so far
        # Whether anything ran on the drive: a run refused after the image was opened (a
        # check that needs the namespace) leaves the image byte for byte as it was.
        self.changed = False
        self.progress: Optional[Callable[[int, int, str, int], object]] = None
        try:
            self.ns = self.drive.nvme.namespace(self.namespace)
        except _core.NvmeError:
            self.drive.close()
            nss = ", ".join(str(n.nsid) for n in self.drive_namespaces(path)) or "none"
            raise PtsError(f"{spec}: namespace {self.namespace} does not exist (namespaces: {nss})") from None
        if not self.ns.attached:
            self.drive.close()
            raise PtsError(f"{spec}: namespace {self.namespace} is not attached")
        self.info = self._info(spec)

    @staticmethod
    def drive_namespaces(path: Path) -> list[Any]:
        d = Drive.open(path, writable=False)
        try:
            return d.namespaces()
        finally:
            d.close()

    def _nand_text(self, nand: dict[str, Any], cell: str) -> str:
        """The header's NAND: the part and cell type; a DRAM namespace (the PBlaze5's
        vendor extension, docs/models.md §9) has none behind it, and no IU to map."""
        if self.ns.dram:
            return "none: a DRAM namespace (the controller's power-loss-protected DRAM)"
        return f"{nand['part']['value']} ({cell})" if isinstance(nand.get("part"), dict) else cell

    def _info(self, spec: str) -> DeviceInfo:
        s = self.drive.spec()
        man = self.drive.manifest()
        nand = s["nand"]
        drv = s["drive"]
        scale = int(man.get("scale", 1))
        ps = self.drive.nvme.get_feature(2)
        states = s.get("power_states") or []
        ps_desc = f"PS{ps}"
        if ps < len(states) and states[ps].get("max_power_mw"):
            ps_desc += f" (max {float(states[ps]['max_power_mw']) / 1000:g} W)"
        cell = {1: "SLC", 2: "MLC", 3: "TLC", 4: "QLC"}.get(int(nand["bits_per_cell"]["value"]), "")
        iface = drv.get("interface", "")
        ctrl = self.drive.nvme.id_ctrl()
        # A namespace smaller than the drive: the reader must see the drive's capacity and how
        # much of it no namespace holds (its NAND is spare for GC: the KIOXIA namespace result,
        # docs/models.md §1), or a small namespace's figures pass for the drive's.
        tnvmcap, unvmcap = int(ctrl.get("tnvmcap", 0)), int(ctrl.get("unvmcap", 0))
        name = str(man.get("preset", drv.get("name", "")))
        made = spec_doc(s, name)
        info = DeviceInfo(
            kind="twin",
            uri=spec,
            vendor=str(drv.get("vendor", "")),
            model=str(drv.get("model", "")),
            serial=str(ctrl.get("sn", "")).strip(),
            firmware=f"ssdtwin {_core.__version__}, {spec_origin(s, name)}",
            capacity_bytes=int(self.ns.bytes),
            lba_bytes=int(self.ns.lba_bytes),
            nand=self._nand_text(nand, cell),
            interface=str(iface.get("value", "") if isinstance(iface, dict) else iface),
            preset=name if made["origin"] == "preset" else "",  # a spec file's name is no preset's
            spec=made,
            scale=f"1/{scale}",
            simulated=True,
            extra={
                **({} if self.ns.dram else {"iu_bytes": int(s["ftl"]["iu_bytes"]["value"])}),
                "namespace": self.namespace,
                "power_state": ps,
                "power_state_desc": ps_desc,
                "image": str(self.path),
                "seed": man.get("seed"),
            },
        )
        if 0 < self.ns.bytes < tnvmcap:
            info.extra["drive_capacity_bytes"] = tnvmcap
            info.extra["unallocated_bytes"] = unvmcap
        return info

    # -- PtsTarget -------------------------------------------------------------------
    def target_lines(self) -> str:
        return "" if self.namespace == 1 else f"filename=ns{self.namespace}"

    def purge(self) -> str:
        if self.purge_method == "none":
            return "none (not purged: --purge none)"
        self.changed = True
        try:
            if self.purge_method == "trim":
                self.drive.deallocate(self.namespace, 0, self.ns.nsze)
                return "twin: TRIM (deallocate) of the whole namespace"
            self.drive.nvme.format(self.namespace, lbaf=self.ns.flbas, ses=1)
        except _core.SsdtwinError as e:
            raise PtsError(f"{self.path}: purge ({self.purge_method}) of namespace {self.namespace} failed: {e}") from None
        return "twin: nvme format --ses=1 (FTL reset: all LBAs unmapped, blocks erased, wear kept)"

    def run_fio(self, job_path: Path, json_path: Path) -> FioJson:
        from .. import fio as fiolib
        from ..fio.run import render, run_jobs, run_jobs_converging

        self.runs += 1
        self.changed = True
        run_seed = self.run_seed(json_path)
        cb = self.progress or _tick
        extra: dict[str, ConvergeOut] = {}  # the JSON's "ssdtwin" keys: "timing"
        try:
            rule = converge_rule(json_path.parent.parent.name) if self.converge else None
            if rule is not None:
                run, results, extra["timing"] = run_jobs_converging(
                    self.drive, [str(job_path)], rule=rule, namespace=self.namespace, run_seed=run_seed, progress=cb
                )
            else:
                run, results = run_jobs(self.drive, [str(job_path)], namespace=self.namespace, run_seed=run_seed, progress=cb)
        except fiolib.FioJobError as e:
            raise PtsError(f"{job_path}: {e.lines()[0]}") from None
        except ValueError as e:
            raise PtsError(f"{job_path}: {e}") from None
        failed = [r.get("error") for r in results if r.get("error")]
        text = render(run, results, "json+", ssdtwin_extra=extra)
        json_path.write_text(text)
        if failed:
            raise PtsError(f"{job_path}: fio job ended with error {failed[0]}")
        out: FioJson = json.loads(text)
        return out

    def run_seed(self, json_path: Path) -> int:
        """The seed of one fio run (fio's would come from the OS with randrepeat=0): from
        --seed and what the run is (its test and its JSON's name: r03-rnd-4k-0_100), so a
        test's runs draw the same streams whatever ran before it."""
        key = f"{self.seed}:{json_path.parent.parent.name}/{json_path.name}".encode()
        return int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "little")

    def idle(self, seconds: float) -> None:
        self.changed = True
        try:
            self.drive.idle(seconds)
        except (ValueError, _core.SsdtwinError) as e:
            raise PtsError(f"{self.path}: idle {seconds} s: {e}") from None

    def commit(self) -> None:
        if self.writable and self.changed:
            self.drive.commit()

    def check(self) -> None:
        self.drive.check()

    def close(self) -> None:
        try:
            self.commit()
        finally:
            self.drive.close()


def converge_rule(test: str) -> Optional[ConvergeRule]:
    """The convergence rule of a test's rounds, or None when they are timed in full.

    Only rounds that read alone converge (``writes: False``): a chunk of writes carried at a
    sampled rate writes an estimated number of I/Os, the drive's state after it differs a
    little from a full round's, and every later element inherits that (GC's phase moved a
    65/35 element's IOPS by up to 2.5 %). Timed in full, a round that writes leaves exactly
    the full run's state, so its figures are the full run's; before GC copies data it is
    also the cheap part (a timed read costs hundreds of times a counted one).

    A rule tracks what the test's report shows: the IOPS, Throughput and Host Idle Recovery
    tests show IOPS and bandwidth alone; the Latency vs IOPS curve also the mean, p99 and
    p99.9 latency. Tests whose report shows the maximum response time (Latency, WSAT, XSR,
    CBW, DIRTH) are timed in full: a maximum comes from every I/O of the round, and no
    sample estimates it (a converged 65/35 QD1 element's was up to 195 % off)."""
    if test in ("iops", "tp", "hir"):
        return {"latency": False, "writes": False}
    if test == "curve":
        return {"percentiles": [99.0, 99.9], "writes": False}
    return None


def _tick(done: int, total: int, unit: str, now_ns: int) -> None:
    """A progress callback that does nothing: with one, Ctrl-C interrupts a long fio run
    promptly (the core calls back now and then, and Python raises KeyboardInterrupt there)."""
