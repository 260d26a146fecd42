"""The registries: backends, models and methods by name; laziness, availability, entry
points (one per group), the built-in-wins rule, options and defaults."""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import subprocess
import sys
import textwrap
import types

import dimod
import numpy as np
import pytest

from bmfdsl import registry as shared_registry
from bmfdsl.errors import (
    BackendUnavailableError,
    BmfdslError,
    InvalidParameterError,
    UnknownNameError,
)
from bmfdsl.modeling import compile_model, list_models
from bmfdsl.pipeline import factorize, solve
from bmfdsl.registry import Registry, check_known_names, normalize_name
from bmfdsl.solvers import (
    DEFAULT_BLS_BACKEND,
    DEFAULT_BLS_PARAMETERS,
    DEFAULT_FACTORIZE_BACKEND,
    DEFAULT_SOLVE_BACKEND,
    BackendInfo,
    check_backend_available,
    get_backend,
    list_backends,
    register_backend,
    resolve_backend,
)
from bmfdsl.solvers import _registry as registry
from bmfdsl.solvers._registry import unregister_backend
from bmfdsl.solvers.methods import METHODS, baseline, get_method

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
    monkeypatch.setattr(shared_registry, "_warned_clashes", set())
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


# ----------------------------------------------------- one mechanism for models and methods

FAKE_MODEL = """
from bmfdsl.models.formulation1 import build  # a plug-in model: the paper's, renamed

DESCRIPTION = "a third-party model"
"""

FAKE_METHOD = """
import numpy as np

def ones(A, rank, *, random_state=None):
    A = np.asarray(A)
    return np.ones((A.shape[0], rank), np.int8), np.ones((A.shape[1], rank), np.int8)
"""


def _fake_entry_points(monkeypatch, group, name, value, dist="third-party-bmf"):
    """Make ``importlib.metadata`` report one installed entry point in ``group``."""
    entry_point = types.SimpleNamespace(
        name=name, value=value, dist=types.SimpleNamespace(name=dist)
    )
    real = importlib.metadata.entry_points

    def entry_points(**kwargs):
        if "group" not in kwargs:  # numba's first compile scans every group for its own
            return real(**kwargs)
        return [entry_point] if kwargs["group"] == group else []

    monkeypatch.setattr(shared_registry, "_warned_clashes", set())
    monkeypatch.setattr(importlib.metadata, "entry_points", entry_points)


def test_third_party_models_come_from_entry_points(tmp_path, monkeypatch):
    (tmp_path / "bmfdsl_fake_model.py").write_text(FAKE_MODEL)
    monkeypatch.syspath_prepend(str(tmp_path))
    _fake_entry_points(monkeypatch, "bmfdsl.models", "My_Model", "bmfdsl_fake_model")
    infos = {info.name: info for info in list_models()}
    assert infos["my-model"].description == "a third-party model"
    assert infos["my-model"].module == "bmfdsl_fake_model"
    compiled = compile_model("my model", np.ones((3, 2)), 1)
    assert compiled.model_name == "my-model"
    assert solve(compiled, "exact")[0].error == 0


def test_third_party_methods_come_from_entry_points(tmp_path, monkeypatch):
    (tmp_path / "bmfdsl_fake_method.py").write_text(FAKE_METHOD)
    monkeypatch.syspath_prepend(str(tmp_path))
    _fake_entry_points(monkeypatch, "bmfdsl.methods", "All_Ones", "bmfdsl_fake_method:ones")
    assert set(METHODS) == {"baseline", "thresholded", "penalized", "all-ones"}
    assert get_method("ALL ONES").__name__ == "ones"
    result = factorize(np.ones((4, 3), dtype=int), 1, method="all_ones", als=False)
    assert result.error == 0 and result.info["method"] == "all-ones"


@pytest.mark.parametrize(
    ("group", "name", "value", "use"),
    [
        ("bmfdsl.models", "Formulation1", "bmfdsl_fake_model", "model"),
        ("bmfdsl.methods", "Baseline", "bmfdsl_fake_method:ones", "method"),
    ],
)
def test_a_model_or_method_plugin_named_like_a_builtin_never_replaces_it(
    tmp_path, monkeypatch, group, name, value, use
):
    (tmp_path / "bmfdsl_fake_model.py").write_text(FAKE_MODEL)
    (tmp_path / "bmfdsl_fake_method.py").write_text(FAKE_METHOD)
    monkeypatch.syspath_prepend(str(tmp_path))
    _fake_entry_points(monkeypatch, group, name, value, dist="evil-bmf")
    with pytest.warns(UserWarning, match="evil-bmf") as caught:
        if use == "model":
            infos = {info.name: info for info in list_models()}
            assert infos["formulation1"].module == "bmfdsl.models.formulation1"
        else:
            assert get_method("baseline") is baseline
    assert f"{use} named {name.lower()!r}" in str(caught[0].message)


@pytest.mark.parametrize(
    ("lookup", "message"),
    [
        (lambda: get_method("simplex"), "unknown method 'simplex'; known methods: 'baseline'"),
        (lambda: get_method(3), "unknown method 3; known methods: 'baseline'"),
        (lambda: compile_model("formulation9", np.ones((2, 2)), 1), "path of a model script"),
        (lambda: factorize(np.ones((2, 2)), 1, method="simplex"), "known methods: 'baseline'"),
        (lambda: get_backend("nael"), "See bmfdsl.list_backends()"),
    ],
)
def test_unknown_names_list_the_known_ones(lookup, message):
    with pytest.raises(UnknownNameError, match=re.escape(message)):
        lookup()


def test_the_generic_registry_normalises_and_registers_at_run_time():
    colours = Registry("colour", "bmfdsl.no-such-group", {"dark-red": "#800000"}, str)
    assert colours.get(" DARK_red ") == ("dark-red", "#800000")
    assert colours.find("blue") is None
    colours.register("Light Blue", "#add8e6")
    assert colours.get("light_blue") == ("light-blue", "#add8e6")
    colours.unregister("LIGHT-BLUE")
    colours.unregister("dark-red")  # built-ins stay
    with pytest.raises(UnknownNameError, match="known colours: 'dark-red'"):
        colours.get("light-blue")


def test_unknown_keywords_are_refused_by_one_check_with_its_hint():
    check_known_names(["seed"], ["seed", "num_reads"])  # known: nothing happens
    with pytest.raises(UnknownNameError, match=r"unknown weight 'mu'; known weights: 'lam'\. Hm"):
        check_known_names(["lam", "mu"], ["lam"], kind="weight", hint="Hm")


def test_each_entry_point_resolves_its_backend_with_its_own_default():
    assert DEFAULT_SOLVE_BACKEND == "neal" and DEFAULT_FACTORIZE_BACKEND == "native"
    assert DEFAULT_BLS_BACKEND == "neal" and DEFAULT_BLS_PARAMETERS == {"num_reads": 10, "seed": 0}
    name, sampler = resolve_backend(None, default=DEFAULT_FACTORIZE_BACKEND)
    assert name == "native" and type(sampler).__name__ == "NativeSampler"
    exact = dimod.ExactSolver()
    assert resolve_backend(exact, default="neal") == ("ExactSolver", exact)
    assert resolve_backend("Exact", default="neal")[0] == "Exact"  # reported as given
    with pytest.raises(InvalidParameterError, match="backend must be a registered name"):
        resolve_backend(42, default="neal")
    result = factorize(np.ones((3, 3), dtype=int), 1, random_state=0)
    assert result.info["backend"] == "native"
    compiled = compile_model("formulation1", np.ones((2, 2)), 1)
    assert solve(compiled, None)[0].error == 0  # None: solve's default, like factorize


def test_check_backend_available_names_without_importing():
    assert check_backend_available("OpenJij_SA") == "openjij-sa"
    with pytest.raises(UnknownNameError, match="nael"):
        check_backend_available("nael")


def test_pyproject_declares_every_entry_point_group():
    import tomllib
    from pathlib import Path

    pyproject = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())
    groups = pyproject["project"]["entry-points"]
    assert {"bmfdsl.backends", "bmfdsl.models", "bmfdsl.methods"} <= set(groups)


def test_item12_listing_backends_imports_no_plugin_package(tmp_path, monkeypatch):
    package = tmp_path / "bmfdsl_fake_loud_pkg"
    (package / "sub").mkdir(parents=True)
    # importing the package leaves a trace: listing must not import it, using it must
    (package / "__init__.py").write_text("import os\nos.environ['BMFDSL_FAKE_LOUD'] = '1'\n")
    (package / "sub" / "__init__.py").write_text("")
    (package / "sub" / "plugin.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("BMFDSL_FAKE_LOUD", "")  # undone after the test, whatever it sets
    monkeypatch.delenv("BMFDSL_FAKE_LOUD")
    entry_point = importlib.metadata.EntryPoint(
        name="loud", value="bmfdsl_fake_loud_pkg.sub.plugin:PluginSampler", group="bmfdsl.backends"
    )
    monkeypatch.setattr(
        registry.importlib.metadata,
        "entry_points",
        lambda *, group: [entry_point] if group == "bmfdsl.backends" else [],
    )
    info = {b.name: b for b in list_backends()}["loud"]
    assert info.available and info.target.startswith("bmfdsl_fake_loud_pkg.sub.plugin")
    assert "bmfdsl_fake_loud_pkg" not in sys.modules and "BMFDSL_FAKE_LOUD" not in os.environ
    assert type(get_backend("loud")).__name__ == "PluginSampler"
    assert os.environ.get("BMFDSL_FAKE_LOUD") == "1"


def test_entry_points_are_scanned_once_until_refreshed(monkeypatch):
    scans = []
    real_entry_points = importlib.metadata.entry_points

    def counting_entry_points(**selection):
        if "group" not in selection:  # numba's start reads every group
            return real_entry_points(**selection)
        scans.append(selection["group"])
        return []

    monkeypatch.setattr(registry.importlib.metadata, "entry_points", counting_entry_points)
    for _ in range(3):
        list_backends()
        factorize(np.eye(3, dtype=int), 1, method="baseline", als=False)
    assert scans.count("bmfdsl.backends") == 1 and scans.count("bmfdsl.methods") == 1
    shared_registry.refresh_entry_points()
    list_backends()
    assert scans.count("bmfdsl.backends") == 2
