"""The size ranges the nightly verdict charts, and the night the nightly mode ships for them (ibrepro.bands)."""

from ibrepro import bands, rfmconfig


def test_bands_are_disjoint_and_the_night_measures_exactly_them():
    for family, ranges in bands.BANDS.items():
        members = [s for band in ranges.values() for s in band]
        assert len(members) == len(set(members)), family
        assert bands.sizes(family) == sorted(members)
        assert all(bands.band_of(family, s) for s in members)
    assert bands.band_of('IMBPointToPoint', 1) is None and bands.band_of('NoSuchFamily', 8) is None


def test_the_nightly_mode_sets_the_bands_rounds_and_control():
    config = rfmconfig.site_configuration([], [], environ={'IBREPRO_NIGHTLY': 'n1'})
    (nightly,) = [m for m in config['modes'] if m['name'] == 'nightly']
    options = nightly['options']
    assert '-SIMBPointToPoint.message_sizes=8,64,512,4096,16384,65536,1048576,4194304' in options
    assert '-SIMBPointToPoint.control=true' in options
    assert f'-SIMBPointToPoint.repetitions={bands.NIGHT["IMBPointToPoint"]["repetitions"]}' in options
