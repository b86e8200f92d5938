"""The capstone's cost of a run (17_capstone): cloud against on-premise per run, and the break-even point."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from gpucourse._validate import non_negative_number, positive_number

HOURS_PER_YEAR = 365 * 24


def cloud_cost_per_run(run_hours: float, usd_per_hour: float) -> float:
    """Renting: you pay the hourly price for the hours the run takes."""
    return positive_number("run_hours", run_hours) * non_negative_number("usd_per_hour", usd_per_hour)


def _utilisation(value: object) -> float:
    """Validate a utilisation: a fraction in (0, 1]."""
    value = positive_number("utilisation", value)
    if value > 1:
        raise ValueError(f"utilisation must be a fraction in (0, 1], got {value}")
    return value


def on_prem_usd_per_hour(purchase_usd: float, lifetime_years: float, utilisation: float, power_kw: float,
                         usd_per_kwh: float) -> float:
    """Owning, per hour of use: the purchase spread over the hours it is used in its lifetime, plus electricity."""
    hours_used = positive_number("lifetime_years", lifetime_years) * HOURS_PER_YEAR * _utilisation(utilisation)
    return (non_negative_number("purchase_usd", purchase_usd) / hours_used
            + non_negative_number("power_kw", power_kw) * non_negative_number("usd_per_kwh", usd_per_kwh))


def on_prem_cost_per_run(run_hours: float, purchase_usd: float, lifetime_years: float, utilisation: float,
                         power_kw: float, usd_per_kwh: float) -> float:
    """Owning: the run's hours at the amortised hourly cost of :func:`on_prem_usd_per_hour`."""
    return positive_number("run_hours", run_hours) * on_prem_usd_per_hour(purchase_usd, lifetime_years, utilisation,
                                                                        power_kw, usd_per_kwh)


def break_even_hours(cloud_usd_per_hour: float, purchase_usd: float, power_kw: float, usd_per_kwh: float) -> float:
    """Hours of use after which buying has cost less than renting: purchase / (cloud price - power cost per hour).

    Returns ``math.inf`` when an hour of electricity costs at least as much as an hour in the cloud.
    """
    saving_per_hour = (non_negative_number("cloud_usd_per_hour", cloud_usd_per_hour)
                       - non_negative_number("power_kw", power_kw) * non_negative_number("usd_per_kwh", usd_per_kwh))
    purchase = non_negative_number("purchase_usd", purchase_usd)
    return purchase / saving_per_hour if saving_per_hour > 0 else math.inf


@dataclass(frozen=True)
class CostComparison:
    """Cloud against on-premise for one training run, and when buying pays off."""

    run_hours: float
    cloud_per_run: float
    on_prem_per_run: float
    break_even_hours: float
    break_even_runs: float
    lifetime_hours_used: float

    @property
    def pays_off_within_lifetime(self) -> bool:
        """True if the hardware is used long enough in its lifetime to reach the break-even point."""
        return self.break_even_hours <= self.lifetime_hours_used

    def summary(self) -> str:
        """A few lines for a learner."""
        when = ("never (electricity alone costs more than renting)" if math.isinf(self.break_even_hours) else
                f"after {self.break_even_hours:,.0f} hours of use = {self.break_even_runs:,.0f} runs")
        verdict = "buying pays off" if self.pays_off_within_lifetime else "renting is cheaper"
        return (f"one run of {self.run_hours:.3g} h: cloud ${self.cloud_per_run:,.4g}, on-premise "
                f"${self.on_prem_per_run:,.4g}\nbreak-even {when}; the hardware is used "
                f"{self.lifetime_hours_used:,.0f} h in its lifetime: {verdict}")


def compare_costs(run_hours: float, cloud_usd_per_hour: float, purchase_usd: float, lifetime_years: float = 3.0,
                  utilisation: float = 0.5, power_kw: float = 0.3, usd_per_kwh: float = 0.25) -> CostComparison:
    """The cost calculator: cost per run both ways, break-even hours and runs, and the lifetime's hours of use."""
    hours = break_even_hours(cloud_usd_per_hour, purchase_usd, power_kw, usd_per_kwh)
    return CostComparison(
        run_hours=positive_number("run_hours", run_hours),
        cloud_per_run=cloud_cost_per_run(run_hours, cloud_usd_per_hour),
        on_prem_per_run=on_prem_cost_per_run(run_hours, purchase_usd, lifetime_years, utilisation, power_kw,
                                             usd_per_kwh),
        break_even_hours=hours, break_even_runs=hours / run_hours,
        lifetime_hours_used=lifetime_years * HOURS_PER_YEAR * utilisation)


def plot_costs(comparison: CostComparison, cloud_usd_per_hour: float, purchase_usd: float, power_kw: float,
               usd_per_kwh: float, ax=None):
    """Cumulative cost against hours of use, renting and buying, with the break-even point; return the Axes."""
    import matplotlib.pyplot as plt

    if not isinstance(comparison, CostComparison):
        raise TypeError(f"comparison must be a CostComparison (from compare_costs), got {type(comparison).__name__}")
    rate = non_negative_number("cloud_usd_per_hour", cloud_usd_per_hour)
    purchase = non_negative_number("purchase_usd", purchase_usd)
    power = non_negative_number("power_kw", power_kw) * non_negative_number("usd_per_kwh", usd_per_kwh)
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 4))
    horizon = 1.1 * comparison.lifetime_hours_used
    if math.isfinite(comparison.break_even_hours):
        horizon = max(horizon, 1.5 * comparison.break_even_hours)
    hours = np.linspace(0, horizon, 200)
    usd = r"\$"  # a plain $ would start matplotlib's maths mode
    ax.plot(hours, rate * hours, label=f"cloud: {usd}{rate:g}/h")
    ax.plot(hours, purchase + power * hours, label=f"buy: {usd}{purchase:,.0f} + {usd}{power:.3g}/h electricity")
    if math.isfinite(comparison.break_even_hours):
        ax.axvline(comparison.break_even_hours, color="grey", linestyle="--", linewidth=1,
                   label=f"break-even: {comparison.break_even_hours:,.0f} h")
    ax.axvline(comparison.lifetime_hours_used, color="green", linestyle=":", linewidth=1,
               label=f"hours used in the lifetime: {comparison.lifetime_hours_used:,.0f}")
    ax.set_xlabel("hours of GPU use")
    ax.set_ylabel("total cost (USD)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    return ax
