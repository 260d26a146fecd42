"""The backend registry: names, laziness, availability, entry points, options."""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys
import textwrap
import types

import dimod
import pytest

from bmfdsl.errors import (
    BackendUnavailableError,
    BmfdslError,
    InvalidParameterError,
    UnknownNameError,
)
from bmfdsl.solvers import BackendInfo, get_backend, list_backends, normalize_name, register_backend
from bmfdsl.solvers import _registry as registry
from bmfdsl.solvers._registry import unregister_backend

BUILTIN_NAMES = {
    "exact",
    "neal",
    "tabu",
    "steepest",
    "openjij-sa",
    "openjij-sqa",
    "dwave-qpu",
    "dwave-hybrid",
    "fujitsu-da",
    "native",
    "da",
}


def test_importing_bmfdsl_and_listing_backends_imports_no_solver():
    code = textwrap.dedent(
        """
        import json, sys
        import bmfdsl
        from bmfdsl.solvers._registry import list_backends
        names = [b.name for b in list_backends()]
        loaded = [m for m in sys.modules if m.split(".")[0] in ("dimod", "openjij", "neal",
                  "numba", "pyqubo") or m.startswith(("dwave.samplers", "dwave.system"))]
        print(json.dumps({"names": names, "loaded": loaded}))
        """
    )
    output = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    report = json.loads(output.stdout.strip().splitlines()[-1])
    assert report["loaded"] == []
    assert set(report["names"]) >= BUILTIN_NAMES


@pytest.mark.parametrize(
    ("spelling", "name"),
    [
        ("NEAL", "neal"),
        ("  neal\t", "neal"),
        ("OpenJij_SA", "openjij-sa"),
        ("openjij--sqa", "openjij-sqa"),
        ("dwave qpu", "dwave-qpu"),
        ("Fujitsu_DA", "fujitsu-da"),
    ],
)
def test_names_are_normalised(spelling, name):
    assert normalize_name(spelling) == name


def test_normalize_name_rejects_non_strings():
    with pytest.raises(InvalidParameterError):
        normalize_name(3)  # type: ignore[arg-type]


def test_get_backend_accepts_any_spelling():
    assert type(get_backend("OpenJij SA")).__name__ == "OpenJijSABackend"
    assert type(get_backend("TABU")).__name__ == "TabuBackend"


def test_list_backends_reports_every_builtin_with_availability():
    infos = {info.name: info for info in list_backends()}
    assert set(infos) >= BUILTIN_NAMES
    assert all(isinstance(info, BackendInfo) for info in infos.values())
    for name in ("exact", "neal", "tabu", "steepest", "openjij-sa", "openjij-sqa", "dwave-qpu"):
        assert infos[name].available, infos[name].reason
        assert infos[name].reason == ""
    assert infos["openjij-sa"].extra == "openjij"
    assert infos["dwave-hybrid"].extra == "dwave"
    assert infos["neal"].extra is None
    assert infos["native"].target == "bmfdsl.backends.native:NativeSampler"
    assert infos["da"].target == "bmfdsl.backends.da:DASampler"
    assert [info.name for info in list_backends()] == sorted(infos)


def test_unknown_name_lists_the_known_names():
    with pytest.raises(UnknownNameError) as caught:
        get_backend("nael")
    message = str(caught.value)
    for name in BUILTIN_NAMES:
        assert repr(name) in message
    assert isinstance(caught.value, KeyError) and isinstance(caught.value, BmfdslError)


def test_missing_optional_dependency_names_the_extra(monkeypatch):
    real_find_spec = registry.importlib.util.find_spec

    def find_spec_without_openjij(name, *args):
        return None if name.split(".")[0] == "openjij" else real_find_spec(name, *args)

    monkeypatch.setattr(registry.importlib.util, "find_spec", find_spec_without_openjij)
    info = {b.name: b for b in list_backends()}["openjij-sqa"]
    assert not info.available
    assert "pip install 'bmfdsl[openjij]'" in info.reason
    with pytest.raises(BackendUnavailableError, match=r"pip install 'bmfdsl\[openjij\]'"):
        get_backend("openjij-sqa")


def test_failing_import_of_a_registered_module_names_the_extra():
    register_backend("broken", "bmfdsl_no_such_module_xyz:Sampler", extra="dwave")
    try:
        info = {b.name: b for b in list_backends()}["broken"]
        assert not info.available
        with pytest.raises(BackendUnavailableError, match=r"bmfdsl\[dwave\]"):
            get_backend("broken")
    finally:
        unregister_backend("broken")


def test_register_backend_validates_the_target():
    with pytest.raises(InvalidParameterError, match="module:ClassName"):
        register_backend("bad", "no_colon_here")


def test_register_backend_can_override_and_be_removed():
    register_backend("Mine", "bmfdsl.backends.exact:ExactBackend", description="mine")
    try:
        info = {b.name: b for b in list_backends()}["mine"]
        assert info.available and info.description == "mine"
        assert type(get_backend("MINE")).__name__ == "ExactBackend"
    finally:
        unregister_backend("mine")
    with pytest.raises(UnknownNameError):
        get_backend("mine")


def test_a_factory_that_returns_no_sampler_is_refused(tmp_path, monkeypatch):
    (tmp_path / "bmfdsl_fake_factory.py").write_text("def make():\n    return object()\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    register_backend("not-a-sampler", "bmfdsl_fake_factory:make")
    try:
        with pytest.raises(
            BackendUnavailableError,
            match=r"neither a dimod\.Sampler nor a bmfdsl StructuredSampler",
        ):
            get_backend("not-a-sampler")
    finally:
        unregister_backend("not-a-sampler")


PLUGIN = '''
import dimod

class PluginSampler(dimod.Sampler):
    """A third-party sampler that always answers all zeros."""

    def __init__(self, flavour="plain"):
        self.flavour = flavour

    parameters = {}
    properties = {}

    def sample(self, bqm, **kwargs):
        zeros = {v: 0 if bqm.vartype is dimod.BINARY else -1 for v in bqm.variables}
        return dimod.SampleSet.from_samples_bqm(zeros, bqm)
'''


def test_third_party_backends_come_from_entry_points(tmp_path, monkeypatch):
    (tmp_path / "bmfdsl_fake_plugin.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    entry_point = importlib.metadata.EntryPoint(
        name="My_Plugin", value="bmfdsl_fake_plugin:PluginSampler", group="bmfdsl.backends"
    )
    seen_groups = []

    def fake_entry_points(*, group):
        seen_groups.append(group)
        return [entry_point] if group == "bmfdsl.backends" else []

    monkeypatch.setattr(registry.importlib.metadata, "entry_points", fake_entry_points)
    info = {b.name: b for b in list_backends()}["my-plugin"]
    assert info.available and info.target == "bmfdsl_fake_plugin:PluginSampler"
    sampler = get_backend("my plugin", flavour="spicy")
    assert type(sampler).__name__ == "PluginSampler" and sampler.flavour == "spicy"
    bqm = dimod.BinaryQuadraticModel({"a": 1.0}, {}, 0.0, "BINARY")
    assert sampler.sample(bqm).first.sample == {"a": 0}
    assert set(seen_groups) == {"bmfdsl.backends"}


def test_backend_options_are_checked_against_the_constructor():
    assert get_backend("exact", max_variables=5).max_variables == 5
    with pytest.raises(UnknownNameError, match="max_variables"):
        get_backend("exact", max_varaibles=5)


def test_every_local_backend_is_a_dimod_sampler_with_honest_common_parameters():
    expected = {
        "exact": set(),
        "neal": {"num_reads", "seed", "time_limit", "initial_states"},
        "tabu": {"num_reads", "seed", "time_limit", "initial_states"},
        "steepest": {"num_reads", "seed", "initial_states"},
        "openjij-sa": {"num_reads", "seed", "time_limit", "initial_states"},
        "openjij-sqa": {"num_reads", "seed", "time_limit", "initial_states"},
    }
    for name, common in expected.items():
        sampler = get_backend(name)
        assert isinstance(sampler, dimod.Sampler)
        listed = set(sampler.parameters)
        assert common <= listed, name
        # a solver without a time knob must not pretend to have one
        if name in ("exact", "steepest"):
            assert "time_limit" not in listed


def test_an_entry_point_named_like_a_builtin_never_replaces_it(tmp_path, monkeypatch):
    (tmp_path / "bmfdsl_fake_plugin.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))

    # an installed entry point as importlib.metadata gives it: name, value, distribution
    entry_point = types.SimpleNamespace(
        name="Native",
        value="bmfdsl_fake_plugin:PluginSampler",
        dist=types.SimpleNamespace(name="evil-solvers"),
    )
    monkeypatch.setattr(registry, "_warned_clashes", set())
    monkeypatch.setattr(
        registry.importlib.metadata,
        "entry_points",
        lambda *, group: [entry_point] if group == "bmfdsl.backends" else [],
    )
    with pytest.warns(UserWarning, match="evil-solvers") as caught:
        sampler = get_backend("native")
    assert type(sampler).__name__ == "NativeSampler"
    assert "'native'" in str(caught[0].message)
    info = {b.name: b for b in list_backends()}["native"]
    assert info.target == "bmfdsl.backends.native:NativeSampler"
