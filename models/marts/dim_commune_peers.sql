-- Each commune's statistical nearest neighbours (int_commune_peers), with names and the
-- covariates that placed them, under a contract.
with peers as (
    select * from {{ ref('int_commune_peers') }}
),

communes as (
    select commune_code, commune_name, region_code from {{ ref('dim_commune') }}
),

covariates as (
    select * from {{ ref('int_commune_peer_covariates') }}
)

select
    peers.commune_code,
    commune.commune_name,
    commune.region_code,
    cast(peers.peer_rank as integer) as peer_rank,
    peers.peer_code,
    peer.commune_name as peer_name,
    peer.region_code as peer_region_code,
    cast(peers.distance as double) as distance,
    peer_covariates.income_poverty_2022 as peer_income_poverty_2022,
    peer_covariates.multidimensional_poverty_2022 as peer_multidimensional_poverty_2022,
    peer_covariates.log10_population as peer_log10_population
from peers
inner join communes as commune on peers.commune_code = commune.commune_code
inner join communes as peer on peers.peer_code = peer.commune_code
inner join covariates as peer_covariates on peers.peer_code = peer_covariates.commune_code
