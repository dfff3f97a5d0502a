-- Each commune against its statistical peers (dim_commune_peers) over each analysis period
-- (docs/methods/inequity.md, "Peers"): the commune's pooled rate over the pooled rate of its k peers,
-- each pooled over its own available years (pool `area_years` of int_period_pooled_counts, as
-- the commune's own period rate). The commune is never its own peer, so the exact conditional
-- interval of two independent Poisson rates applies as it is.
with pooled as (
    select * from {{ ref('int_period_pooled_counts') }}
    where pool = 'area_years' and area_level = 'commune'
),

peers as (
    select commune_code, peer_code from {{ ref('dim_commune_peers') }}
),

peer_sums as (
    select
        peers.commune_code,
        pooled.indicator,
        pooled.period_start,
        pooled.period_end,
        count(*) as n_peers,
        sum(pooled.deaths) as peer_deaths,
        sum(pooled.live_births) as peer_live_births
    from peers
    inner join pooled on peers.peer_code = pooled.area_code
    group by peers.commune_code, pooled.indicator, pooled.period_start, pooled.period_end
),

paired as (
    select
        commune.area_code as commune_code,
        commune.area_name as commune_name,
        commune.region_code,
        commune.indicator,
        commune.period_start,
        commune.period_end,
        commune.period_label,
        commune.deaths,
        commune.live_births,
        commune.rate_per_1000,
        commune.multiplier,
        peer_sums.n_peers,
        peer_sums.peer_deaths,
        peer_sums.peer_live_births,
        {{ rate('peer_sums.peer_deaths', 'peer_sums.peer_live_births', 'commune.multiplier') }} as peer_rate_per_1000
    from pooled as commune
    inner join peer_sums
        on commune.area_code = peer_sums.commune_code
        and commune.indicator = peer_sums.indicator
        and commune.period_start = peer_sums.period_start
        and commune.period_end = peer_sums.period_end
),

compared as (
    select
        *,
        live_births > 0 and peer_live_births > 0 as is_comparable,
        rate_per_1000 / nullif(peer_rate_per_1000, 0) as rate_ratio
    from paired
),

bounded as (
    select
        *,
        case when is_comparable
            then imr_rate_ratio_lower(deaths, live_births, peer_deaths, peer_live_births, 0.95) end as rr_lower,
        case when is_comparable
            then imr_rate_ratio_upper(deaths, live_births, peer_deaths, peer_live_births, 0.95) end as rr_upper
    from compared
)

select
    commune_code,
    commune_name,
    region_code,
    indicator,
    cast(period_start as integer) as period_start,
    cast(period_end as integer) as period_end,
    period_label,
    cast(deaths as bigint) as deaths,
    cast(live_births as bigint) as live_births,
    rate_per_1000,
    cast(n_peers as integer) as n_peers,
    cast(peer_deaths as bigint) as peer_deaths,
    cast(peer_live_births as bigint) as peer_live_births,
    peer_rate_per_1000,
    rate_ratio,
    rr_lower as rate_ratio_ci95_lower,
    rr_upper as rate_ratio_ci95_upper,
    -- The class is read off the interval beside it, so the two never disagree.
    case
        when rr_lower > 1 then 'higher'
        when rr_upper < 1 then 'lower'
        when is_comparable then 'similar'
    end as comparison
from bounded
